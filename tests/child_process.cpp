// run_child: posix_spawn with stdout and stderr on two pipes, read until the
// child closes both or the bound passes, then reaped.

#include "child_process.hpp"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace gradd::test {

namespace {

std::string name_of(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

/// This process's environment with `changes` applied.
std::vector<std::string> environment_with(const std::vector<std::string>& changes) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool changed = false;
    for (const auto& c : changes)
      changed = changed || name_of(c) == name_of(*e);
    if (!changed)
      env.emplace_back(*e);
  }
  for (const auto& c : changes)
    if (c.find('=') != std::string::npos)
      env.push_back(c);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings)
    pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

/// Fills in how the child ended (wait status `status`) and how long since `start`.
void settle(child_result& result, std::chrono::steady_clock::time_point start, int status) {
  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - start);
  if (WIFEXITED(status))
    result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status) && !result.timed_out)
    result.signal = WTERMSIG(status);
}

} // namespace

child_result run_child(const std::vector<std::string>& argv, std::chrono::milliseconds bound,
                       const std::vector<std::string>& env) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  auto args = argv;
  auto environment = environment_with(env);
  auto arg_pointers = c_strings(args);
  auto env_pointers = c_strings(environment);

  auto start = std::chrono::steady_clock::now();
  auto deadline = start + bound;
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                            env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  if (spawned != 0) {
    close(out[0]);
    close(err[0]);
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(spawned));
  }

  child_result result;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_pipes = 2;
  char buffer[4096];
  while (open_pipes > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) <= 0)
      continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0)
        continue;
      auto n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;  // poll skips it
        --open_pipes;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0)
      close(f.fd);
  // A child that closed its output may still be exiting: bounded as well.
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    usleep(1000);
  }
  settle(result, start, status);
  return result;
}

background_child::background_child(const std::vector<std::string>& argv,
                                   const std::string& out_file, const std::string& err_file,
                                   const std::vector<std::string>& env)
    : out_file_(out_file), err_file_(err_file) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_file.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  auto args = argv;
  auto environment = environment_with(env);
  auto arg_pointers = c_strings(args);
  auto env_pointers = c_strings(environment);
  pid_t pid = 0;
  int spawned = posix_spawn(&pid, arg_pointers[0], &actions, nullptr, arg_pointers.data(),
                            env_pointers.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(spawned));
  pid_ = pid;
}

background_child::~background_child() {
  if (!reaped_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

uint64_t background_child::resident_kib() const {
  std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stoull(line.substr(6));
  return 0;
}

void background_child::signal(int number) const {
  if (!reaped_)
    kill(pid_, number);
}

child_result background_child::wait(std::chrono::milliseconds bound) {
  child_result result;
  auto start = std::chrono::steady_clock::now();
  int status = 0;
  while (!reaped_) {
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      break;
    }
    if (std::chrono::steady_clock::now() - start > bound) {
      result.timed_out = true;
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      reaped_ = true;
      break;
    }
    usleep(2000);
  }
  settle(result, start, status);
  auto slurp = [](const std::string& path) {
    std::string text;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buffer[4096];
      size_t n = 0;
      while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0)
        text.append(buffer, n);
      std::fclose(f);
    }
    return text;
  };
  result.out = slurp(out_file_);
  result.err = slurp(err_file_);
  return result;
}

} // namespace gradd::test
