#include "src/launcher/output.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace ringlet::launcher {

OutputSink::OutputSink(int fd) : fd_(fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;
  if (S_ISSOCK(st.st_mode)) {
    socket_ = true;
  } else if (S_ISFIFO(st.st_mode)) {
    const std::string path = fmt::format("/proc/self/fd/{}", fd);
    reopened_.reset(open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
    if (reopened_.valid()) fd_ = reopened_.get();
  }
}

ssize_t OutputSink::writeSome(std::string_view bytes) {
  while (true) {
    const ssize_t n = socket_ ? ::send(fd_, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL)
                              : ::write(fd_, bytes.data(), bytes.size());
    if (n >= 0 || errno != EINTR) return n;
  }
}

void OutputSink::flush() {
  while (!queue_.empty()) {
    const ssize_t n = writeSome(queue_);
    if (n > 0) {
      queue_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // A closed terminal or a reader that went away: drop the output rather than stop the job.
    dropped_ += queue_.size();
    queue_.clear();
  }
}

void OutputSink::add(std::string_view bytes) {
  if (queue_.empty()) {
    const ssize_t n = writeSome(bytes);
    if (n > 0) bytes.remove_prefix(static_cast<size_t>(n));
    if (bytes.empty()) return;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      dropped_ += bytes.size();
      return;
    }
  }
  queue_.append(bytes);
}

LineForwarder::LineForwarder(int rank, net::Fd source, OutputSink& sink)
    : prefix_(fmt::format("[{}] ", rank)), source_(std::move(source)), sink_(&sink) {
  net::setNonBlocking(source_.get());
}

void LineForwarder::emit(std::string_view line) {
  std::string out;
  out.reserve(prefix_.size() + line.size() + 1);
  out += prefix_;
  out += line;
  out += '\n';
  sink_->add(out);
}

void LineForwarder::readAvailable() {
  std::array<char, 65536> buffer;
  while (source_.valid() && sink_->wantsMore()) {
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
