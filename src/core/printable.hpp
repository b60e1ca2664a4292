// Untrusted bytes (a file's content, a key from a corpus) made safe to put in a one-line
// error message: control and non-UTF-8 bytes escaped, length capped.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace megatron {

// `text` with control characters and bytes that are not UTF-8 written as \xNN (\n, \r, \t as
// such; a backslash doubled), valid UTF-8 kept, cut to `max_bytes` of input with "..." appended:
// a value quoted in an error line stays short and unambiguous.
std::string printable(std::string_view text, std::size_t max_bytes = 80);

// A whole message made one terminal-safe line: control characters (a newline, an escape
// sequence from a file) and bytes that are not UTF-8 escaped as \xNN, valid UTF-8 kept (paths
// and text in any language stay readable), cut at `max_bytes`. The CLI passes every error
// through it, so no input can break the one-line contract or drive the terminal.
std::string one_line(std::string_view message, std::size_t max_bytes = 4096);

}  // namespace megatron
