#pragma once

// Scratch files for the policy tests, in a folder of this process's own.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace gradd::test {

/// A fresh, empty folder under the system's temporary folder.
inline std::filesystem::path scratch_folder() {
  static int counter = 0;
  auto folder = std::filesystem::temp_directory_path()
                / ("gradd_policy_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(folder);
  std::filesystem::create_directories(folder);
  return folder;
}

/// Writes `bytes` to a fresh file and returns its path.
inline std::string policy_file(const std::string& bytes) {
  auto path = scratch_folder() / "policy.yaml";
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

} // namespace gradd::test
