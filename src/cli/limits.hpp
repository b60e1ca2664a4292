// Validators for the CLI's numeric flags: readable range errors (CLI11's own print the
// double's full range) and the ceilings on threads and processes this machine can run.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace megatron::cli {

// A whole number from 1 to `max` ("--nodes: 0 is not a whole number from 1 to 1000000").
CLI::Validator whole_number(long long max);
// A whole number from 1 to the ceiling of the recipe key the flag stands for
// ("parallel.tensor"), so a flag accepts exactly what its key accepts.
CLI::Validator like_key(const std::string& path);
// A rank: a whole number from 0 (the layout says how many there are).
CLI::Validator rank_number();
// A seed: a whole number from 0 to 2^64 - 1 ("--seed: -1 is not a whole number from 0 to
// 18446744073709551615").
CLI::Validator whole_number_from_zero();
// A positive number (minutes, seconds): finite and above 0.
CLI::Validator positive_number();
// A thread or process count: 1 to max_parallelism() (core/parallelism.hpp), saying why when
// it is more.
CLI::Validator parallelism(const std::string& what);

}  // namespace megatron::cli
