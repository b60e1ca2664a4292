// "Did you mean ...?": the closest known name to a misspelt one, by edit distance.
// Used for unknown keys, sections, enum values and hardware names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::recipe {

// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, if it is close enough to be a plausible typo
// (at most a third of the longer name's letters differ, minimum 2).
std::optional<std::string> closest(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean X?)" or "".
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace megatron::recipe
