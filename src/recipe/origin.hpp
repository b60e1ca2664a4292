// Where a recipe value came from: a file position, a command-line override, or the default.
// Every error about a value names its origin, so users can go straight to the offending line.
#pragma once

#include <map>
#include <string>

namespace megatron::recipe {

struct Origin {
  std::string file;       // recipe file as the user named it (or as reached through base:)
  int line = 0;           // 1-based; 0 when unknown
  int column = 0;         // 1-based; 0 when unknown
  std::string override_;  // the command-line override text when the value came from one

  bool is_override() const { return !override_.empty(); }
  bool known() const { return is_override() || !file.empty(); }
  // "recipes/x.yaml:12:5" or "override 'training.lr=3e-4'" or "default".
  std::string describe() const;
};

// Dotted field path ("model.hidden_size") -> where its value was set.
using Provenance = std::map<std::string, Origin>;

}  // namespace megatron::recipe
