#include "tools/output_file.hpp"

#include <memarea/error.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace memarea::cli {

void require_writable(const std::string& path, const char* what) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (std::filesystem::is_directory(p, ec))
    throw error(errc::invalid_value, std::string(what) + ": " + path + " is a directory");
  const bool exists = std::filesystem::exists(p, ec);
  const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  const int rc = exists ? ::access(path.c_str(), W_OK) : ::access(dir.c_str(), W_OK | X_OK);
  const int err = errno;  // before anything else can change it
  if (rc != 0)
    throw error(errc::invalid_value,
                std::string(what) + ": cannot write " + path + ": " + std::strerror(err));
}

void write_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();  // a failed flush shows only here
  if (!f) throw error(errc::invalid_value, std::string(what) + ": cannot write " + path);
}

}  // namespace memarea::cli
