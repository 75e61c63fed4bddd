// The mode switch of engine/lifecycle.hpp, and process exit.
//
// Applying a mode orders its steps so that no backward sees half of it: the
// hook comes off before the pipeline stops, and goes on after the pipeline
// and the settings are in place. At process exit gradd unhooks and
// interrupts its compiles without touching an actor (CAF's statics are
// being destroyed); later mode changes, e.g. a guard at namespace scope
// ending during static destruction, only unhook.

#include "engine/lifecycle.hpp"

#include "engine/engine_state.hpp"
#include "engine/entry_gate.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace gradd::engine {

namespace {

/// How long exit waits for interrupted compiles to settle.
constexpr std::chrono::milliseconds exit_grace{2000};

class mode_stack {
public:
  static mode_stack& instance() {
    static auto* stack = new mode_stack;  // never destroyed: used during exit
    return *stack;
  }

  void change(const std::function<void(engine_mode&)>& change) {
    std::lock_guard lock(mutex_);
    change(scopes_.empty() ? outside_ : scopes_.back().second);
    apply(innermost());
  }

  uint64_t open(const std::function<engine_mode(const engine_mode&)>& derive) {
    std::lock_guard lock(mutex_);
    auto token = next_token_++;
    scopes_.emplace_back(token, derive(innermost()));
    apply(innermost());
    return token;
  }

  void close(uint64_t token) {
    std::lock_guard lock(mutex_);
    std::erase_if(scopes_, [&](const auto& s) { return s.first == token; });
    apply(innermost());
  }

  bool hooked() const noexcept { return hooked_.load(); }

private:
  const engine_mode& innermost() const {
    return scopes_.empty() ? outside_ : scopes_.back().second;
  }

  // Requires mutex_.
  void apply(const engine_mode& mode) {
    auto& state = engine_state::instance();
    bool hook = mode.hooked && !exiting_;
    if (!hook && hooked_.load()) {
      switch_hook(false);
      hooked_ = false;  // after the hook: the entry gate still guards its window
    }
    if (exiting_)
      return;
    if (mode.compiling) {
      state.start(mode.config);
      register_exit_handler();
    } else {
      state.stop();
    }
    state.use_settings(mode.config);
    if (hook && !hooked_.load()) {
      hooked_ = true;  // before the hook: the entry gate guards its window
      switch_hook(true);
    }
  }

  /// Registered after the first pipeline started, so that it runs before
  /// the statics that start created are destroyed.
  void register_exit_handler() {
    if (!exit_handler_registered_)
      std::atexit([] { instance().at_exit(); });
    exit_handler_registered_ = true;
  }

  void at_exit() {
    {
      std::lock_guard lock(mutex_);
      exiting_ = true;
      if (hooked_.load()) {
        switch_hook(false);
        hooked_ = false;
      }
    }
    engine_state::instance().drain_at_exit(exit_grace);
  }

  std::mutex mutex_;
  engine_mode outside_;
  std::vector<std::pair<uint64_t, engine_mode>> scopes_;
  uint64_t next_token_ = 1;
  std::atomic<bool> hooked_{false};  ///< read lock-free by the entry gate
  bool exit_handler_registered_ = false;
  bool exiting_ = false;
};

} // namespace

bool hook_installed() noexcept {
  return mode_stack::instance().hooked();
}

void change_mode(const std::function<void(engine_mode&)>& change) {
  mode_stack::instance().change(change);
}

uint64_t open_scope(const std::function<engine_mode(const engine_mode&)>& derive) {
  return mode_stack::instance().open(derive);
}

void close_scope(uint64_t token) {
  mode_stack::instance().close(token);
}

} // namespace gradd::engine
