// The `megatron` command line: builds the CLI11 app, dispatches subcommands, and is the one
// place where errors become "megatron: error: ..." lines and exit codes.
#pragma once

namespace megatron::cli {

int run(int argc, char** argv);

}  // namespace megatron::cli
