// The `megatron` executable: every subcommand lives in src/cli/.
#include "cli/app.hpp"

int main(int argc, char** argv) { return megatron::cli::run(argc, argv); }
