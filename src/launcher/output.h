#pragma once
// The ranks' output on its way to the launcher's own stdout and stderr.
//
// LineForwarder reads one output stream of one rank (its stdout or stderr pipe) and hands every
// line, prefixed "[rank] ", to an OutputSink. A partial line is held until its newline arrives or
// the stream ends; a line longer than kMaxHeldBytes is cut so memory stays bounded.
//
// OutputSink writes to one of the launcher's descriptors without ever blocking: a reader of the
// launcher's stdout that stops reading must not stop the launcher from reaping, signalling and
// timing out its ranks. What the descriptor does not take at once is queued, up to
// kMaxQueuedBytes; a full sink asks the supervisor (wantsMore() false) to stop reading the ranks
// that write to it, so the back pressure lands on those ranks, not on the launcher.

#include <cstddef>
#include <string>
#include <string_view>

#include "src/net/socket.h"

namespace ringlet::launcher {

class OutputSink {
 public:
  static constexpr size_t kMaxQueuedBytes = 4 << 20;

  // Writes to `fd` (1 or 2). A pipe or FIFO is reopened through /proc/self/fd as a nonblocking
  // description of its own (the shell's description stays blocking); a socket is written with
  // MSG_DONTWAIT; anything else (a terminal, a file) is written as it is.
  explicit OutputSink(int fd);

  // Queues whole lines (one write per line where possible keeps lines of different ranks whole)
  // and writes what the descriptor takes now.
  void add(std::string_view bytes);
  // Writes queued bytes until the descriptor would block.
  void flush();
  bool pending() const { return !queue_.empty(); }
  bool wantsMore() const { return queue_.size() < kMaxQueuedBytes; }
  // The descriptor to poll for POLLOUT while pending().
  int pollFd() const { return fd_; }
  // Output that could not be written (the reader went away): dropped, counted.
  size_t droppedBytes() const { return dropped_; }

 private:
  ssize_t writeSome(std::string_view bytes);

  int fd_;
  net::Fd reopened_;  // the nonblocking description of a pipe, when there is one
  bool socket_ = false;
  std::string queue_;
  size_t dropped_ = 0;
};

class LineForwarder {
 public:
  static constexpr size_t kMaxHeldBytes = 1 << 20;

  // Takes the read end of a pipe (made nonblocking here); writes into `sink`, which outlives it.
  LineForwarder(int rank, net::Fd source, OutputSink& sink);

  int fd() const { return source_.get(); }
  bool open() const { return source_.valid(); }
  const OutputSink& sink() const { return *sink_; }

  // Reads what is available now (as long as the sink wants more) and forwards every complete
  // line. At end of stream, forwards the held partial line (with a newline added) and closes the
  // pipe. Never blocks.
  void readAvailable();
  // Forwards the held partial line and closes the pipe (used when the launcher stops waiting).
  void finish();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  net::Fd source_;
  OutputSink* sink_;
  std::string held_;
};

}  // namespace ringlet::launcher
