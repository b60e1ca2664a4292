#include "data/gpt2_bpe_writer.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "data/byte_unicode.hpp"

namespace megatron::data {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEndOfText = "<|endoftext|>";

std::string vocab_text(const BpeVocabulary& vocabulary) {
  // By hand rather than through a JSON object, which would sort the keys: listing tokens in
  // id order keeps the file diffable against GPT-2's and readable from the top.
  std::string out = "{";
  for (std::size_t id = 0; id < vocabulary.tokens.size(); ++id) {
    out += nlohmann::json(gpt2_spell_bytes(vocabulary.tokens[id])).dump();
    out += ": " + std::to_string(id) + ", ";
  }
  // Pre-tokens never join "<|" with letters, so no learned token can be spelt like this one.
  out += nlohmann::json(std::string(kEndOfText)).dump() + ": " +
         std::to_string(vocabulary.tokens.size()) + "}\n";
  return out;
}

std::string merges_text(const BpeVocabulary& vocabulary) {
  std::string out = "#version: 0.2\n";
  for (const BpeMerge& m : vocabulary.merges) {
    out += gpt2_spell_bytes(vocabulary.tokens[m.left]) + " " +
           gpt2_spell_bytes(vocabulary.tokens[m.right]) + "\n";
  }
  return out;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw RuntimeFailure("cannot write '" + path.string() + "'");
}

}  // namespace

void check_gpt2_bpe_destination(const std::string& dir, bool overwrite) {
  const fs::path root(dir);
  std::error_code error;
  if (fs::exists(root, error) && !fs::is_directory(root, error)) {
    throw UserError("--output-dir '" + dir + "' is a file, not a directory");
  }
  for (const char* name : {"vocab.json", "merges.txt"}) {
    if (!overwrite && fs::exists(root / name, error)) {
      throw UserError("'" + (root / name).string() +
                      "' already exists; pass --force to replace it");
    }
  }
}

Gpt2BpeFiles write_gpt2_bpe(const BpeVocabulary& vocabulary, const std::string& dir,
                            bool overwrite) {
  check_gpt2_bpe_destination(dir, overwrite);
  const fs::path root(dir);
  Gpt2BpeFiles files{.vocab_json = (root / "vocab.json").string(),
                     .merges_txt = (root / "merges.txt").string(),
                     .vocab_size = static_cast<int64_t>(vocabulary.tokens.size()) + 1};
  std::error_code error;
  fs::create_directories(root, error);
  if (error) throw RuntimeFailure("cannot create '" + dir + "': " + error.message());

  const std::string suffix = ".tmp-" + std::to_string(::getpid());
  const fs::path vocab_tmp = files.vocab_json + suffix;
  const fs::path merges_tmp = files.merges_txt + suffix;
  try {
    write_file(vocab_tmp, vocab_text(vocabulary));
    write_file(merges_tmp, merges_text(vocabulary));
    fs::rename(merges_tmp, files.merges_txt);
    fs::rename(vocab_tmp, files.vocab_json);
  } catch (const fs::filesystem_error& e) {
    fs::remove(vocab_tmp, error);
    fs::remove(merges_tmp, error);
    throw RuntimeFailure("cannot write the tokenizer into '" + dir + "': " + e.what());
  } catch (...) {
    fs::remove(vocab_tmp, error);
    fs::remove(merges_tmp, error);
    throw;
  }
  return files;
}

}  // namespace megatron::data
