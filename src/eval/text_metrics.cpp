#include "eval/text_metrics.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace megatron::eval {
namespace {

using Text = std::u32string;
using NgramCounts = std::unordered_map<Text, int64_t>;

// Substitution of maximal subparts (Unicode 15 §3.9, table 3-7): the policy of Python's
// decode(errors="replace") and Rust's from_utf8_lossy, so the code points match theirs.
Text decode_utf8(std::string_view bytes) {
  Text out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const auto lead = static_cast<unsigned char>(bytes[i]);
    if (lead < 0x80) {
      out.push_back(lead);
      ++i;
      continue;
    }
    int length = 0;
    unsigned char second_lo = 0x80, second_hi = 0xBF;
    char32_t value = 0;
    if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2, value = lead & 0x1F;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3, value = lead & 0x0F;
      if (lead == 0xE0) second_lo = 0xA0;  // overlong
      if (lead == 0xED) second_hi = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4, value = lead & 0x07;
      if (lead == 0xF0) second_lo = 0x90;  // overlong
      if (lead == 0xF4) second_hi = 0x8F;  // above U+10FFFF
    }
    size_t used = 1;
    bool complete = length > 0;
    for (int k = 1; complete && k < length; ++k) {
      const unsigned char lo = k == 1 ? second_lo : 0x80, hi = k == 1 ? second_hi : 0xBF;
      if (i + k >= bytes.size()) {
        complete = false;
        break;
      }
      const auto b = static_cast<unsigned char>(bytes[i + k]);
      if (b < lo || b > hi) {
        complete = false;
        break;
      }
      value = (value << 6) | (b & 0x3F);
      ++used;
    }
    out.push_back(complete ? value : U'\uFFFD');
    i += used;
  }
  return out;
}

std::string encode_utf8(const Text& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

// Python's str.isspace(), which str.split() and str.rstrip() use: bidi class WS, B or S, or
// category Zs. Not quite Unicode's White_Space: the separators U+001C..U+001F are in it.
bool is_python_space(char32_t c) {
  if (c <= 0x20) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  if (c >= 0x2000 && c <= 0x200A) return true;
  constexpr std::array<char32_t, 8> kOthers = {0x85,   0xA0,   0x1680, 0x2028,
                                               0x2029, 0x202F, 0x205F, 0x3000};
  return std::find(kOthers.begin(), kOthers.end(), c) != kOthers.end();
}

// Python's str.split() with no argument.
std::vector<Text> split_whitespace(const Text& text) {
  std::vector<Text> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_python_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_python_space(text[i])) ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

Text join_words(const std::vector<Text>& words) {
  Text out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out.push_back(U' ');
    out += words[i];
  }
  return out;
}

// Python's str.replace: leftmost, non-overlapping.
void replace_all(Text& text, std::u32string_view from, std::u32string_view to) {
  Text out;
  size_t start = 0;
  for (size_t at = text.find(from); at != Text::npos; at = text.find(from, start)) {
    out.append(text, start, at - start);
    out += to;
    start = at + from.size();
  }
  if (start == 0) return;
  out.append(text, start);
  text = std::move(out);
}

// --- SQuAD ---------------------------------------------------------------------------------

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

char32_t simple_lower(char32_t c) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
}

// Unicode's Cased property, as Python's final-sigma rule reads it. utf8proc has no Cased
// table: Lu, Ll, Lt and characters with a case mapping, plus the Other_Lowercase and
// Other_Uppercase characters that have neither (the ordinals ª º and the squared and negative
// circled capitals), equal it on every character that is not also case-ignorable (those are
// skipped before Cased is asked); checked against Python 3.11 over all of Unicode 14.
bool is_cased(char32_t c) {
  const auto cat = category(c);
  if (cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT) {
    return true;
  }
  const auto ci = static_cast<utf8proc_int32_t>(c);
  return utf8proc_tolower(ci) != ci || utf8proc_toupper(ci) != ci || c == 0xAA || c == 0xBA ||
         (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
         (c >= 0x1F170 && c <= 0x1F189);
}

// Unicode's Case_Ignorable: Mn, Me, Cf, Lm, Sk, and Word_Break MidLetter, MidNumLet or
// Single_Quote.
bool is_case_ignorable(char32_t c) {
  switch (category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  constexpr std::array<char32_t, 17> kWordBreakMid = {
      0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,  0x5F4,  0x2018, 0x2019,
      0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return std::find(kWordBreakMid.begin(), kWordBreakMid.end(), c) != kWordBreakMid.end();
}

// Python's handle_capital_sigma: Σ lowers to ς at the end of a word, σ elsewhere.
char32_t lower_capital_sigma(const Text& text, size_t at) {
  size_t j = at;
  while (j > 0 && is_case_ignorable(text[j - 1])) --j;
  if (j == 0 || !is_cased(text[j - 1])) return U'σ';
  size_t k = at + 1;
  while (k < text.size() && is_case_ignorable(text[k])) ++k;
  return k == text.size() || !is_cased(text[k]) ? U'ς' : U'σ';
}

// Python's str.lower(): full lower case mapping. İ is SpecialCasing's only unconditional
// mapping to more than one character; Σ is its only conditional one Python applies.
Text python_lower(const Text& text) {
  Text out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == 0x3A3) {
      out.push_back(lower_capital_sigma(text, i));
    } else if (c == 0x130) {
      out += U"i\u0307";
    } else {
      out.push_back(simple_lower(c));
    }
  }
  return out;
}

// Python's re \w for str patterns: str.isalnum() or '_'; isalnum is a letter (L*) or a
// character with a numeric value, which are all N* or Lo.
bool is_word_char(char32_t c) {
  if (c == U'_') return true;
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

bool is_ascii_punctuation(char32_t c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

Text squad_normalize_text(std::string_view text) {
  Text lowered = python_lower(decode_utf8(text));
  Text no_punct;
  no_punct.reserve(lowered.size());
  for (char32_t c : lowered) {
    if (!is_ascii_punctuation(c)) no_punct.push_back(c);
  }
  // re.sub(r'\b(a|an|the)\b', ' ', text): a match is a whole maximal run of word characters.
  Text no_articles;
  no_articles.reserve(no_punct.size());
  size_t i = 0;
  while (i < no_punct.size()) {
    if (!is_word_char(no_punct[i])) {
      no_articles.push_back(no_punct[i++]);
      continue;
    }
    const size_t start = i;
    while (i < no_punct.size() && is_word_char(no_punct[i])) ++i;
    const std::u32string_view word(no_punct.data() + start, i - start);
    if (word == U"a" || word == U"an" || word == U"the") {
      no_articles.push_back(U' ');
    } else {
      no_articles += word;
    }
  }
  return join_words(split_whitespace(no_articles));
}

void require_golds(const std::vector<std::string>& golds, const char* metric) {
  if (golds.empty()) {
    throw std::invalid_argument(std::string(metric) + ": no gold answers to compare with");
  }
}

// SQuAD v1.1's f1_score for one gold.
double token_f1_one(const std::vector<Text>& prediction, const std::vector<Text>& gold) {
  std::unordered_map<Text, int64_t> gold_counts;
  for (const Text& t : gold) ++gold_counts[t];
  int64_t same = 0;
  for (const Text& t : prediction) {
    auto it = gold_counts.find(t);
    if (it != gold_counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  // The official script's operations in its order, so the value is its to the last bit.
  const double precision = 1.0 * static_cast<double>(same) / static_cast<double>(prediction.size());
  const double recall = 1.0 * static_cast<double>(same) / static_cast<double>(gold.size());
  return (2 * precision * recall) / (precision + recall);
}

// --- sacreBLEU -----------------------------------------------------------------------------

std::string signature_nrefs(size_t streams) { return "nrefs:" + std::to_string(streams); }

void check_corpus(const std::vector<std::string>& hypotheses,
                  const std::vector<std::vector<std::string>>& references, const char* metric) {
  const std::string who(metric);
  if (hypotheses.empty()) throw std::invalid_argument(who + ": no hypotheses");
  if (references.empty()) throw std::invalid_argument(who + ": no reference streams");
  for (size_t k = 0; k < references.size(); ++k) {
    if (references[k].size() != hypotheses.size()) {
      throw std::invalid_argument(who + ": reference stream " + std::to_string(k) + " has " +
                                  std::to_string(references[k].size()) + " references for " +
                                  std::to_string(hypotheses.size()) + " hypotheses");
    }
  }
}

// tokenizer_re.py's language-dependent class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation
// and space, but not the apostrophe, hyphen, period or comma, which the rules below handle.
bool is_13a_symbol(char32_t c) {
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

bool is_ascii_digit(char32_t c) { return c >= U'0' && c <= U'9'; }
bool is_period_or_comma(char32_t c) { return c == U'.' || c == U','; }

// One pass of re.sub over a two-character pattern (first, second) -> head + g1 + mid + g2 +
// tail: matches are found left to right and do not overlap, as Python's re.sub finds them.
template <typename First, typename Second>
Text substitute_pairs(const Text& text, First first, Second second, std::u32string_view head,
                      std::u32string_view mid, std::u32string_view tail) {
  Text out;
  out.reserve(text.size() + text.size() / 2);
  size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && first(text[i]) && second(text[i + 1])) {
      out += head;
      out.push_back(text[i]);
      out += mid;
      out.push_back(text[i + 1]);
      out += tail;
      i += 2;
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// sacrebleu/tokenizers/tokenizer_13a.py followed by tokenizer_re.py, rule for rule.
std::vector<Text> tokens_13a(Text line) {
  replace_all(line, U"<skipped>", U"");
  replace_all(line, U"-\n", U"");
  replace_all(line, U"\n", U" ");
  replace_all(line, U"&quot;", U"\"");
  replace_all(line, U"&amp;", U"&");
  replace_all(line, U"&lt;", U"<");
  replace_all(line, U"&gt;", U">");
  line = U" " + line + U" ";
  Text text;
  text.reserve(line.size() * 2);
  for (char32_t c : line) {
    if (is_13a_symbol(c)) {
      text.push_back(U' ');
      text.push_back(c);
      text.push_back(U' ');
    } else {
      text.push_back(c);
    }
  }
  const auto not_digit = [](char32_t c) { return !is_ascii_digit(c); };
  const auto is_dash = [](char32_t c) { return c == U'-'; };
  // Period and comma split off unless preceded by a digit, then unless followed by one.
  text = substitute_pairs(text, not_digit, is_period_or_comma, U"", U" ", U" ");
  text = substitute_pairs(text, is_period_or_comma, not_digit, U" ", U" ", U"");
  // A dash after a digit splits off (ranges such as 3-4).
  text = substitute_pairs(text, is_ascii_digit, is_dash, U"", U" ", U" ");
  return split_whitespace(text);
}

// Python's str.rstrip() with no argument.
Text rstrip(Text text) {
  while (!text.empty() && is_python_space(text.back())) text.pop_back();
  return text;
}

constexpr int kBleuOrder = 4;

// Every n-gram of orders 1..4 of a token list, counted (helpers.extract_all_word_ngrams).
// Tokens hold no whitespace, so a space-joined key is unique per n-gram; orders are kept apart.
std::array<NgramCounts, kBleuOrder> word_ngrams(const std::vector<Text>& tokens) {
  std::array<NgramCounts, kBleuOrder> counts;
  for (int n = 1; n <= kBleuOrder; ++n) {
    for (size_t i = 0; i + n <= tokens.size(); ++i) {
      Text key = tokens[i];
      for (int k = 1; k < n; ++k) {
        key.push_back(U' ');
        key += tokens[i + k];
      }
      ++counts[n - 1][key];
    }
  }
  return counts;
}

// bleu.py's _get_closest_ref_len: ties go to the shorter reference.
int64_t closest_ref_len(int64_t hyp_len, const std::vector<int64_t>& ref_lens) {
  int64_t closest_diff = -1, closest_len = -1;
  for (int64_t ref_len : ref_lens) {
    const int64_t diff = std::abs(hyp_len - ref_len);
    if (closest_diff == -1 || diff < closest_diff) {
      closest_diff = diff;
      closest_len = ref_len;
    } else if (diff == closest_diff && ref_len < closest_len) {
      closest_len = ref_len;
    }
  }
  return closest_len;
}

// utils.my_log: log(0) floored so that a zero precision zeroes the score without a NaN.
double my_log(double x) { return x == 0.0 ? -9999999999.0 : std::log(x); }

// bleu.py's compute_bleu with smooth_method "exp" and no effective order, operation for
// operation, so the doubles are the same as sacreBLEU's.
void compute_bleu(BleuScore& s) {
  s.brevity_penalty = 1.0;
  if (s.hyp_len < s.ref_len) {
    s.brevity_penalty =
        s.hyp_len > 0
            ? std::exp(1 - static_cast<double>(s.ref_len) / static_cast<double>(s.hyp_len))
            : 0.0;
  }
  s.ratio = s.ref_len != 0 ? static_cast<double>(s.hyp_len) / static_cast<double>(s.ref_len) : 0.0;
  s.precisions.fill(0.0);
  s.score = 0.0;
  if (std::all_of(s.counts.begin(), s.counts.end(), [](int64_t c) { return c == 0; })) return;
  double smooth_mteval = 1.0;
  for (int n = 0; n < kBleuOrder; ++n) {
    // No n-grams of this order at all: it and the higher orders keep precision 0.
    if (s.totals[n] == 0) break;
    if (s.counts[n] == 0) {
      smooth_mteval *= 2;
      s.precisions[n] = 100. / (smooth_mteval * static_cast<double>(s.totals[n]));
    } else {
      s.precisions[n] = 100. * static_cast<double>(s.counts[n]) / static_cast<double>(s.totals[n]);
    }
  }
  double log_sum = 0.0;
  for (double p : s.precisions) log_sum += my_log(p);
  s.score = s.brevity_penalty * std::exp(log_sum / kBleuOrder);
}

constexpr int kChrfCharOrder = 6;
constexpr int kChrfBeta = 2;
// Per order: hypothesis n-grams, reference n-grams, matched n-grams (chrf.py's triplets).
using ChrfStats = std::array<int64_t, size_t{3} * kChrfCharOrder>;

// helpers.extract_all_char_ngrams with whitespace excluded.
std::array<NgramCounts, kChrfCharOrder> char_ngrams(const Text& text) {
  Text joined;
  for (const Text& w : split_whitespace(text)) joined += w;
  std::array<NgramCounts, kChrfCharOrder> counts;
  for (int n = 1; n <= kChrfCharOrder; ++n) {
    for (size_t i = 0; i + n <= joined.size(); ++i) ++counts[n - 1][joined.substr(i, n)];
  }
  return counts;
}

// chrf.py's _compute_f_score without eps smoothing (the default): precision and recall are
// averaged over the orders where both sides have n-grams, then one F-beta of the averages.
double chrf_f_score(const ChrfStats& stats) {
  const int factor = kChrfBeta * kChrfBeta;
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (size_t i = 0; i < kChrfCharOrder; ++i) {
    const int64_t n_hyp = stats[3 * i], n_ref = stats[3 * i + 1], n_match = stats[3 * i + 2];
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += static_cast<double>(n_match) / static_cast<double>(n_hyp);
      avg_rec += static_cast<double>(n_match) / static_cast<double>(n_ref);
      ++effective_order;
    }
  }
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return 0.0;
  double score = (1 + factor) * avg_prec * avg_rec;
  score /= (factor * avg_prec) + avg_rec;
  return 100 * score;
}

ChrfStats chrf_match_stats(const std::array<NgramCounts, kChrfCharOrder>& hyp,
                           const std::array<NgramCounts, kChrfCharOrder>& ref) {
  ChrfStats stats{};
  for (size_t n = 0; n < kChrfCharOrder; ++n) {
    int64_t hyp_count = 0, ref_count = 0, match = 0;
    for (const auto& [ngram, count] : hyp[n]) {
      hyp_count += count;
      if (auto it = ref[n].find(ngram); it != ref[n].end()) match += std::min(count, it->second);
    }
    for (const auto& entry : ref[n]) ref_count += entry.second;
    // sacreBLEU counts no hypothesis n-grams of an order the reference is too short to have.
    stats[3 * n] = ref[n].empty() ? 0 : hyp_count;
    stats[3 * n + 1] = ref_count;
    stats[3 * n + 2] = match;
  }
  return stats;
}

}  // namespace

std::string squad_normalize(std::string_view text) {
  return encode_utf8(squad_normalize_text(text));
}

double exact_match(std::string_view prediction, const std::vector<std::string>& golds) {
  require_golds(golds, "exact_match");
  const Text normalized = squad_normalize_text(prediction);
  for (const std::string& gold : golds) {
    if (squad_normalize_text(gold) == normalized) return 1.0;
  }
  return 0.0;
}

double token_f1(std::string_view prediction, const std::vector<std::string>& golds) {
  require_golds(golds, "token_f1");
  const std::vector<Text> predicted = split_whitespace(squad_normalize_text(prediction));
  double best = 0.0;
  for (const std::string& gold : golds) {
    best = std::max(best, token_f1_one(predicted, split_whitespace(squad_normalize_text(gold))));
  }
  return best;
}

std::string tokenize_13a(std::string_view text) {
  return encode_utf8(join_words(tokens_13a(decode_utf8(text))));
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
  check_corpus(hypotheses, references, "corpus_bleu");
  BleuScore s;
  std::vector<int64_t> ref_lens(references.size());
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    // A hypothesis n-gram is credited up to its largest count in any one reference.
    std::array<NgramCounts, kBleuOrder> ref_max;
    for (size_t k = 0; k < references.size(); ++k) {
      const std::vector<Text> tokens = tokens_13a(rstrip(decode_utf8(references[k][i])));
      ref_lens[k] = static_cast<int64_t>(tokens.size());
      auto counts = word_ngrams(tokens);
      for (int n = 0; n < kBleuOrder; ++n) {
        for (auto& [ngram, count] : counts[n]) {
          int64_t& best = ref_max[n][ngram];
          best = std::max(best, count);
        }
      }
    }
    const std::vector<Text> tokens = tokens_13a(rstrip(decode_utf8(hypotheses[i])));
    const auto hyp_len = static_cast<int64_t>(tokens.size());
    s.hyp_len += hyp_len;
    s.ref_len += closest_ref_len(hyp_len, ref_lens);
    const auto hyp = word_ngrams(tokens);
    for (int n = 0; n < kBleuOrder; ++n) {
      for (const auto& [ngram, count] : hyp[n]) {
        s.totals[n] += count;
        if (auto it = ref_max[n].find(ngram); it != ref_max[n].end()) {
          s.counts[n] += std::min(count, it->second);
        }
      }
    }
  }
  compute_bleu(s);
  s.signature = signature_nrefs(references.size()) +
                "|case:mixed|eff:no|tok:13a|smooth:exp|version:" + std::string(kSacrebleuVersion);
  return s;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references) {
  check_corpus(hypotheses, references, "corpus_chrf");
  ChrfStats total{};
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const auto hyp = char_ngrams(decode_utf8(hypotheses[i]));
    // The best reference by its own F-score (the first on a tie) lends its statistics.
    ChrfStats best{};
    double best_f = -1.0;
    for (const auto& stream : references) {
      const ChrfStats stats = chrf_match_stats(hyp, char_ngrams(decode_utf8(stream[i])));
      const double f = chrf_f_score(stats);
      if (f > best_f) {
        best_f = f;
        best = stats;
      }
    }
    for (size_t j = 0; j < total.size(); ++j) total[j] += best[j];
  }
  ChrfScore s;
  s.score = chrf_f_score(total);
  s.char_order = kChrfCharOrder;
  s.word_order = 0;
  s.beta = kChrfBeta;
  s.signature = signature_nrefs(references.size()) +
                "|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" + std::string(kSacrebleuVersion);
  return s;
}

}  // namespace megatron::eval
