// The layers of docs/design.md, "Layout": each folder includes its own
// headers and those of the layers below it, never one above. A consumer
// (python/, examples/) includes only the public headers in include/gradd/.

#include "daemon/test_daemon.hpp"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

/// What each folder's files may include besides their own folder's headers,
/// bottom layer first. "gradd" is include/gradd/, the public headers.
const std::map<std::string, std::set<std::string>>& layers() {
  static const std::map<std::string, std::set<std::string>> may_include = {
      {"gradd", {}},
      {"compiler", {}},
      {"config", {"gradd", "compiler"}},
      {"actors", {"gradd", "compiler", "config"}},
      {"capture", {"gradd", "compiler", "config"}},
      {"execute", {"gradd", "compiler", "config", "capture"}},
      {"functional", {"gradd", "compiler", "config", "capture", "execute"}},
      {"cuda", {"gradd", "compiler", "config", "actors", "capture", "execute", "functional"}},
      {"engine",
       {"gradd", "compiler", "config", "actors", "capture", "execute", "functional", "cuda"}},
      {"daemon", {"gradd", "compiler", "config", "actors"}},
      {"bench", {"gradd", "compiler", "config", "actors", "examples"}},
      {"examples", {"gradd"}},
      {"python", {"gradd"}},
  };
  return may_include;
}

/// The one consumer that includes a private header: the in-process actor
/// API speaks gradd's CAF types (daemon/host_api.hpp).
const std::set<std::pair<std::string, std::string>> exceptions = {
    {"examples/host_actor_system.cpp", "daemon/host_api.hpp"},
};

/// The folder (layer) a path in the tree belongs to; include/gradd/ is
/// "gradd".
std::string layer_of(const std::string& path) {
  const std::string public_headers = "include/";
  auto start = path.rfind(public_headers, 0) == 0 ? public_headers.size() : 0;
  return path.substr(start, path.find('/', start) - start);
}

/// Every `#include "folder/..."` of `root`'s sources that runs up a layer or
/// sideways, and every source in a folder no layer names, as "FILE: WHY".
std::vector<std::string> wrong_includes(const fs::path& root) {
  static const std::regex include_line(R"re(^\s*#\s*include\s*"([^"]+)")re");
  const auto& may = layers();
  std::vector<std::string> wrong;
  for (const auto& folder : fs::directory_iterator(root)) {
    auto name = folder.path().filename().string();
    if (!folder.is_directory() || name == "tests" || name.rfind("build", 0) == 0
        || name.front() == '.')
      continue;
    for (const auto& entry : fs::recursive_directory_iterator(folder.path())) {
      auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".hpp" && ext != ".cpp" && ext != ".cu"))
        continue;
      auto file = fs::relative(entry.path(), root).generic_string();
      auto layer = layer_of(file);
      auto rules = may.find(layer);
      if (rules == may.end()) {
        wrong.push_back(file + ": in a folder no layer names");
        continue;
      }
      std::ifstream in(entry.path());
      std::smatch m;
      for (std::string line; std::getline(in, line);) {
        if (!std::regex_search(line, m, include_line))
          continue;
        auto target = m[1].str();
        auto target_layer = target.substr(0, target.find('/'));
        bool ours = may.count(target_layer) && target.find('/') != std::string::npos;
        if (!ours || target_layer == layer || rules->second.count(target_layer)
            || exceptions.count({file, target}))
          continue;
        wrong.push_back(file + ": includes " + target + ", in layer " + target_layer);
      }
    }
  }
  return wrong;
}

/// Writes `text` to `root`/`path`, folders and all.
void write(const fs::path& root, const std::string& path, const std::string& text) {
  fs::create_directories((root / path).parent_path());
  std::ofstream(root / path) << text;
}

} // namespace

TEST_CASE("every include of the tree points down a layer", "[layout]") {
  auto wrong = wrong_includes(GRADD_SOURCE_DIR);
  for (const auto& w : wrong)
    UNSCOPED_INFO(w);
  CHECK(wrong.empty());
}

TEST_CASE("the include check finds an include that runs back up", "[layout]") {
  gradd::test::case_folder folder;
  fs::path root = folder.path();
  write(root, "include/gradd/gradd.hpp", "#include <vector>\n");
  write(root, "engine/hook.cpp", "#include \"cuda/graph_path.hpp\"\n#include \"gradd/gradd.hpp\"\n");
  write(root, "cuda/graph_path.hpp", "#include \"functional/graph.hpp\"\n#include <torch/torch.h>\n");
  CHECK(wrong_includes(root).empty());  // down only, and libraries' headers are not ours

  write(root, "cuda/graph_path.cpp", "#include \"cuda/graph_path.hpp\"\n#include \"engine/hook.hpp\"\n");
  write(root, "python/native.cpp", "#include \"engine/entry_gate.hpp\"\n");
  write(root, "include/gradd/statistics.hpp", "  #include \"compiler/ir.hpp\"\n");
  write(root, "attic/old.cpp", "\n");
  auto wrong = wrong_includes(root);
  std::set<std::string> found(wrong.begin(), wrong.end());
  CHECK(found == std::set<std::string>{
                     "attic/old.cpp: in a folder no layer names",
                     "cuda/graph_path.cpp: includes engine/hook.hpp, in layer engine",
                     "include/gradd/statistics.hpp: includes compiler/ir.hpp, in layer compiler",
                     "python/native.cpp: includes engine/entry_gate.hpp, in layer engine",
                 });
}
