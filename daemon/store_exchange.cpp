// The store exchange, through libtorch's own c10d client.

#include "daemon/store_exchange.hpp"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace gradd::daemon {

namespace {

using clock = std::chrono::steady_clock;

std::vector<uint8_t> bytes(const std::string& text) {
  return {text.begin(), text.end()};
}

uint64_t as_number(const std::vector<uint8_t>& value, const std::string& key) {
  std::string text(value.begin(), value.end());
  size_t used = 0;
  uint64_t number = 0;
  try {
    number = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size())
    throw std::runtime_error("the store's " + key + " holds '" + text + "', not a proposal");
  return number;
}

} // namespace

std::string store_prefix(uint32_t attempt, uint64_t key, uint64_t round) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(key));
  return "gradd/agree/" + std::to_string(attempt) + "/" + hex + "/" + std::to_string(round) + "/";
}

uint64_t exchange_through_store(const store_round& round) {
  auto deadline = clock::now() + round.timeout;
  auto colon = round.store.rfind(':');
  if (colon == std::string::npos)
    throw std::runtime_error("the job's store '" + round.store + "' names no port");
  c10d::TCPStoreOptions options;
  options.port = static_cast<uint16_t>(std::stoul(round.store.substr(colon + 1)));
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = round.timeout;
  try {
    c10d::TCPStore store(round.store.substr(0, colon), options);
    store.set(round.prefix + std::to_string(round.machine),
              bytes(std::to_string(round.largest_here)));
    std::vector<std::string> keys;
    for (uint32_t machine = 0; machine < round.machines; ++machine)
      keys.push_back(round.prefix + std::to_string(machine));
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    store.wait(keys, std::max(left, std::chrono::milliseconds(1)));
    uint64_t largest = 0;
    for (const auto& key : keys)
      largest = std::max(largest, as_number(store.get(key), key));
    return largest;
  } catch (const c10::Error& error) {
    // c10's message carries a C++ backtrace; its first line says what failed.
    std::string what = error.what_without_backtrace();
    throw std::runtime_error("the job's store at " + round.store + ": "
                             + what.substr(0, what.find('\n')));
  }
}

} // namespace gradd::daemon
