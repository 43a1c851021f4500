#pragma once
// Forwards one output stream of one rank (its stdout or stderr pipe) to the launcher's own
// stdout or stderr, prefixing every line with "[rank] ". A partial line is held until its newline
// arrives or the stream ends; a line longer than kMaxHeldBytes is cut so memory stays bounded.

#include <cstddef>
#include <string>

#include "src/net/socket.h"

namespace ringlet::launcher {

class LineForwarder {
 public:
  static constexpr size_t kMaxHeldBytes = 1 << 20;

  // Takes the read end of a pipe (made nonblocking here); writes to `destination` (1 or 2).
  LineForwarder(int rank, net::Fd source, int destination);

  int fd() const { return source_.get(); }
  bool open() const { return source_.valid(); }

  // Reads what is available now and forwards every complete line. At end of stream, forwards
  // the held partial line (with a newline added) and closes the pipe. Never blocks on the pipe.
  void readAvailable();
  // Forwards the held partial line and closes the pipe (used when the launcher stops waiting).
  void finish();

 private:
  void emit(std::string_view line);

  std::string prefix_;
  net::Fd source_;
  int destination_;
  std::string held_;
};

}  // namespace ringlet::launcher
