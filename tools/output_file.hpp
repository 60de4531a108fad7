// Files the CLI and memarea-bench write their results to (topo --svg, memarea-bench --json).
#pragma once

#include <string>

namespace memarea::cli {

/// Throws invalid_value ("<what>: cannot write <path>: <reason>") unless `path` can be written:
/// an existing file that is writable, or a new name in a writable directory. Called before a
/// long measurement so that a typo fails at once; creates and changes nothing.
void require_writable(const std::string& path, const char* what);

/// Writes `text` to `path` (replacing it), checking every step including the close; throws
/// invalid_value on failure.
void write_file(const std::string& path, const std::string& text, const char* what);

}  // namespace memarea::cli
