// The job's layout from torchrun's variables.

#include "actors/job_layout.hpp"

#include <charconv>
#include <optional>

namespace gradd::actors {

namespace {

std::optional<uint32_t> number(const char* text) {
  if (!text || !*text)
    return std::nullopt;
  uint32_t value = 0;
  auto end = text + std::char_traits<char>::length(text);
  auto [stop, error] = std::from_chars(text, end, value);
  if (error != std::errc{} || stop != end)
    return std::nullopt;
  return value;
}

} // namespace

job_layout read_job_layout(const std::function<const char*(const char*)>& getenv) {
  job_layout alone;
  const char* addr = getenv("MASTER_ADDR");
  const char* port = getenv("MASTER_PORT");
  auto world_size = number(getenv("WORLD_SIZE"));
  if (!addr || !*addr || !number(port) || !world_size || *world_size < 1)
    return alone;
  job_layout layout;
  layout.store = std::string(addr) + ":" + port;
  layout.attempt = number(getenv("TORCHELASTIC_RESTART_COUNT")).value_or(0);
  layout.world_size = *world_size;
  layout.local_ranks = number(getenv("LOCAL_WORLD_SIZE")).value_or(layout.world_size);
  if (layout.local_ranks < 1 || layout.local_ranks > layout.world_size)
    return alone;
  auto rank = number(getenv("RANK")).value_or(0);
  layout.machine = number(getenv("GROUP_RANK")).value_or(rank / layout.local_ranks);
  layout.machines = number(getenv("GROUP_WORLD_SIZE"))
                        .value_or((layout.world_size + layout.local_ranks - 1) / layout.local_ranks);
  if (layout.machines < 1 || layout.machine >= layout.machines)
    return alone;
  return layout;
}

} // namespace gradd::actors
