#include "src/launcher/output.h"

#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace ringlet::launcher {
namespace {

// Writes everything, retrying short writes; output that cannot be written (closed terminal,
// broken pipe) is dropped rather than stopping the job.
void writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

LineForwarder::LineForwarder(int rank, net::Fd source, int destination)
    : prefix_(fmt::format("[{}] ", rank)), source_(std::move(source)), destination_(destination) {
  net::setNonBlocking(source_.get());
}

void LineForwarder::emit(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out += prefix_;
  out += line;
  out += '\n';
  writeAll(destination_, out);  // one write per line keeps lines of different ranks whole
}

void LineForwarder::readAvailable() {
  std::array<char, 65536> buffer;
  while (source_.valid()) {
    ssize_t n = read(source_.get(), buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      finish();  // a broken pipe ends the stream like EOF
      return;
    }
    if (n == 0) {
      finish();
      return;
    }
    held_.append(buffer.data(), static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl = held_.find('\n'); nl != std::string::npos; nl = held_.find('\n', start)) {
      emit(std::string_view(held_).substr(start, nl - start));
      start = nl + 1;
    }
    held_.erase(0, start);
    while (held_.size() >= kMaxHeldBytes) {
      emit(std::string_view(held_).substr(0, kMaxHeldBytes));
      held_.erase(0, kMaxHeldBytes);
    }
  }
}

void LineForwarder::finish() {
  if (!held_.empty()) {
    emit(held_);
    held_.clear();
  }
  source_.reset();
}

}  // namespace ringlet::launcher
