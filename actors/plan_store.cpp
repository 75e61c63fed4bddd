// Plans on disk (see plan_store.hpp). A file is the header line, the
// SHA-256 of the body, and the body: the IR and plan in CAF's binary
// serialization (actors/ir_inspect.hpp, as the pipeline's messages). CAF
// reads a sequence element by element and a string only as far as the
// bytes go, so a forged length cannot make it allocate past the file.

#include "actors/plan_store.hpp"

#include "actors/actor_system.hpp"
#include "actors/digest.hpp"
#include "actors/ir_inspect.hpp"
#include "compiler/foreign_plan.hpp"

#include <caf/actor_system.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <torch/version.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

namespace gradd::actors {

namespace {

/// The first line of every file: what wrote it.
std::string header() {
  return std::string("gradd-plan 3 gradd ") + GRADD_VERSION + " torch " + TORCH_VERSION + "\n";
}

/// The whole of regular file `path` if it has at most `max_bytes`; else
/// nothing, and why in `refused` ("" when there is no file).
std::optional<std::string> read_regular_file(const std::string& path, size_t max_bytes,
                                             std::string& refused) {
  // O_NOFOLLOW: the store writes files, never links; O_NONBLOCK: a FIFO of
  // that name must not hang the open.
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT)
      refused = std::string("cannot be opened: ") + std::strerror(errno);
    return std::nullopt;
  }
  struct stat info {};
  std::optional<std::string> bytes;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode))
    refused = "not a regular file";
  else if (static_cast<uint64_t>(info.st_size) > max_bytes)
    refused = std::to_string(info.st_size) + " bytes, over daemon.max_message_mb";
  else {
    std::string whole(static_cast<size_t>(info.st_size), '\0');
    size_t done = 0;
    while (done < whole.size()) {
      auto n = ::read(fd, whole.data() + done, whole.size() - done);
      if (n <= 0)
        break;
      done += static_cast<size_t>(n);
    }
    if (done == whole.size())
      bytes = std::move(whole);
    else
      refused = "cannot be read whole";
  }
  ::close(fd);
  return bytes;
}

} // namespace

std::string plan_file(const std::string& dir, uint64_t key) {
  char name[32];
  std::snprintf(name, sizeof name, "/%016llx.plan", static_cast<unsigned long long>(key));
  return dir + name;
}

std::string store_plan(const std::string& dir, uint64_t key, const stored_plan& stored) {
  std::string body;
  {
    std::vector<char> bytes;
    caf::binary_serializer sink{process_actor_system(), bytes};
    auto copy = stored;
    if (auto error = sink(copy.ir, copy.plan))
      return "cannot serialize the plan: " + process_actor_system().render(error);
    body.assign(bytes.begin(), bytes.end());
  }
  static std::atomic<uint64_t> writes{0};
  // POSIX calls, not std::filesystem: libtorch.so exports an older build of
  // std::filesystem that the dynamic linker binds gradd's calls to (its
  // remove_all crashed in a test).
  auto target = plan_file(dir, key);
  auto temporary = target + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(writes++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    auto head = header();
    auto sum = sha256(body);
    out.write(head.data(), static_cast<std::streamsize>(head.size()));
    out.write(reinterpret_cast<const char*>(sum.data()), static_cast<std::streamsize>(sum.size()));
    out.write(body.data(), static_cast<std::streamsize>(body.size()));
    out.flush();
    if (!out) {
      ::unlink(temporary.c_str());
      return "cannot write " + temporary;
    }
  }
  // Atomic: readers see the old file or the new one.
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    ::unlink(temporary.c_str());
    return "cannot rename " + temporary + " to " + target;
  }
  return {};
}

plan_load load_plan(const std::string& dir, uint64_t key, size_t max_bytes) {
  plan_load found;
  auto bytes = read_regular_file(plan_file(dir, key), max_bytes, found.refused);
  if (!bytes)
    return found;
  auto head = header();
  digest sum{};
  if (bytes->size() < head.size() + sum.size() || bytes->compare(0, head.size(), head) != 0) {
    found.refused = "not a plan file of this gradd and torch version";
    return found;
  }
  std::string_view body(*bytes);
  body.remove_prefix(head.size() + sum.size());
  if (!same_bytes(as_bytes(sha256(body)), std::string_view(*bytes).substr(head.size(), sum.size()))) {
    found.refused = "its checksum does not hold";
    return found;
  }
  stored_plan stored;
  try {
    caf::binary_deserializer source{process_actor_system(), body.data(), body.size()};
    if (source(stored.ir, stored.plan) || source.remaining() != 0) {
      found.refused = "its body does not deserialize";
      return found;
    }
  } catch (const std::exception& e) {
    found.refused = std::string("its body does not deserialize: ") + e.what();
    return found;
  }
  found.plan = std::move(stored);
  return found;
}

plan_load load_plan_for(const std::string& dir, uint64_t key, const compiler::graph& table,
                        size_t max_bytes) {
  auto found = load_plan(dir, key, max_bytes);
  if (!found.plan)
    return found;
  if (auto why = compiler::check_foreign_plan(found.plan->ir, found.plan->plan, table);
      !why.empty()) {
    found.plan.reset();
    found.refused = why;
  }
  return found;
}

std::string absolute_folder(const std::string& dir) {
  if (dir.empty() || dir.front() == '/')
    return dir;
  // getcwd, not std::filesystem::absolute (see store_plan).
  std::vector<char> cwd(4096);
  if (::getcwd(cwd.data(), cwd.size()) == nullptr)
    return dir;
  return std::string(cwd.data()) + "/" + dir;
}

} // namespace gradd::actors
