#include "src/launcher/guardian.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>

#include "ringlet/error.h"
#include "src/launcher/options.h"

namespace ringlet::launcher {
namespace {

constexpr int32_t kWatch = 1;
constexpr int32_t kForget = 2;
constexpr int32_t kDismiss = 3;

struct Message {
  int32_t op;
  int32_t group;
};

// The guardian itself: only async-signal-safe calls from here on (the launcher may have
// threads by the time it is forked in tests; in ringlet-run it has none yet).
[[noreturn]] void guard(int fd) {
  setsid();
  prctl(PR_SET_NAME, "ringlet-guard");
  // Keep only the pipe: the launcher's stdout/stderr pipes must not stay open through us.
  const int devNull = open("/dev/null", O_RDWR);
  if (devNull >= 0) {
    dup2(devNull, STDIN_FILENO);
    dup2(devNull, STDOUT_FILENO);
    dup2(devNull, STDERR_FILENO);
  }
  if (fd < 3) _exit(0);  // cannot happen: 0-2 are open in the launcher
  if (fd > 3) syscall(SYS_close_range, 3U, static_cast<unsigned>(fd - 1), 0U);
  syscall(SYS_close_range, static_cast<unsigned>(fd + 1), ~0U, 0U);
  std::array<pid_t, kMaxRanks> groups{};
  size_t count = 0;
  Message message{};
  size_t got = 0;
  while (true) {
    const ssize_t n = read(fd, reinterpret_cast<char*>(&message) + got, sizeof(message) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the launcher is gone
    got += static_cast<size_t>(n);
    if (got < sizeof(message)) continue;
    got = 0;
    if (message.op == kDismiss) _exit(0);
    if (message.op == kWatch && count < groups.size() && message.group > 1) {
      groups[count++] = message.group;
    } else if (message.op == kForget) {
      for (size_t i = 0; i < count; ++i) {
        if (groups[i] == message.group) groups[i] = groups[--count];
      }
    }
  }
  for (size_t i = 0; i < count; ++i) kill(-groups[i], SIGKILL);
  _exit(0);
}

}  // namespace

Guardian Guardian::start() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    throw IoError(fmt::format("pipe2 failed for the guardian: {}", net::errorText(errno)));
  }
  net::Fd readEnd(fds[0]), writeEnd(fds[1]);
  const pid_t pid = fork();
  if (pid < 0)
    throw IoError(fmt::format("fork failed for the guardian: {}", net::errorText(errno)));
  if (pid == 0) {
    writeEnd.reset();
    guard(readEnd.get());
  }
  Guardian guardian;
  guardian.pipe_ = std::move(writeEnd);
  guardian.pid_ = pid;
  return guardian;
}

void Guardian::send(int op, pid_t group) {
  if (!pipe_.valid()) return;
  const Message message{op, static_cast<int32_t>(group)};
  // 8 bytes to a pipe are written whole or not at all; a guardian that died is not fatal.
  while (write(pipe_.get(), &message, sizeof(message)) < 0 && errno == EINTR) {
  }
}

void Guardian::watch(pid_t group) { send(kWatch, group); }
void Guardian::forget(pid_t group) { send(kForget, group); }

void Guardian::dismiss() {
  send(kDismiss, 0);
  pipe_.reset();
}

}  // namespace ringlet::launcher
