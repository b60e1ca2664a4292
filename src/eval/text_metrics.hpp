// Metrics that compare generated text with reference text: SQuAD's exact match and token F1,
// and sacreBLEU's corpus BLEU and chrF, each reproducing its public reference's numbers.
//
// Text is UTF-8 and is read as Python reads it: as code points, with invalid bytes becoming
// U+FFFD per maximal invalid subsequence (Python's decode(errors="replace"), and what a Hugging
// Face tokenizer's decode yields), so byte-level tokenizers' split characters score as Python's
// scripts would score their decoded text. "Whitespace" is Python's str.split() set throughout.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace megatron::eval {

// The sacreBLEU release whose code corpus_bleu and corpus_chrf follow, as its signatures name it.
inline constexpr std::string_view kSacrebleuVersion = "2.6.0";

// SQuAD v1.1's normalize_answer: Python's str.lower() (full Unicode lower case, final sigma
// included), every ASCII punctuation character (string.punctuation) dropped, the words a, an and
// the dropped (word as Python's Unicode \b sees it), whitespace runs collapsed to one space and
// the ends trimmed.
std::string squad_normalize(std::string_view text);

// SQuAD v1.1's exact match, max over golds (metric_max_over_ground_truths): 1.0 when the
// normalised prediction equals some normalised gold, else 0.0. Throws std::invalid_argument when
// golds is empty (the official script's max() of nothing).
double exact_match(std::string_view prediction, const std::vector<std::string>& golds);

// SQuAD v1.1's token F1 over the whitespace tokens of the normalised texts (multiset overlap),
// max over golds, in [0, 1]. Two empty texts score 0, as in v1.1 (v2.0 changed that to 1).
// Throws std::invalid_argument when golds is empty.
double token_f1(std::string_view prediction, const std::vector<std::string>& golds);

// sacreBLEU's 13a (mteval-v13a) tokenisation of one segment, tokens joined by single spaces:
// what BLEU counts n-grams over. Exposed so the tokeniser can be checked on its own.
std::string tokenize_13a(std::string_view text);

struct BleuScore {
  double score = 0.0;                  // 0..100
  std::array<double, 4> precisions{};  // 0..100, per n-gram order, smoothed as the score is
  double brevity_penalty = 0.0;
  double ratio = 0.0;               // hyp_len / ref_len (0 when ref_len is 0)
  int64_t hyp_len = 0;              // 13a tokens in all hypotheses
  int64_t ref_len = 0;              // per hypothesis, the closest reference's length
  std::array<int64_t, 4> counts{};  // matched n-grams per order (clipped by references)
  std::array<int64_t, 4> totals{};  // hypothesis n-grams per order
  std::string signature;  // e.g. nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0
};

// sacreBLEU's corpus_bleu with its defaults: 13a tokens, exp smoothing, mixed case, n-grams up
// to 4, no effective order. references[k][i] is the k-th reference stream's reference for
// hypotheses[i] (sacreBLEU's layout); every stream has hypotheses.size() entries. Throws
// std::invalid_argument when there are no hypotheses, no reference streams, or a stream of
// another length (sacreBLEU's zip would silently cut the corpus short).
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

struct ChrfScore {
  double score = 0.0;  // 0..100
  int char_order = 6;
  int word_order = 0;
  double beta = 2.0;
  std::string signature;  // e.g. nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0
};

// sacreBLEU's corpus_chrf with its defaults (chrF2): character n-grams of orders 1 to 6 over the
// text with whitespace removed, no word n-grams, beta 2, mixed case. Each hypothesis takes the
// statistics of its best-scoring reference (the first on a tie); the statistics are summed over
// the corpus and one F-score is computed from the sums, averaging precision and recall over the
// orders that have both hypothesis and reference n-grams (sacreBLEU's default "eff:yes"; its
// eps_smoothing=True variant is not provided). Same layout and errors as corpus_bleu.
ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses,
                      const std::vector<std::vector<std::string>>& references);

}  // namespace megatron::eval
