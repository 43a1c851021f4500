#pragma once
// The guardian: a small process that outlives a killed launcher and stops what it started.
//
// Each rank leads its own process group and gets SIGKILL when the launcher dies (parent-death
// signal), but that signal reaches only the rank itself: a rank wrapped in `sh -c`, or one that
// starts helpers, would leave them running when the launcher is SIGKILLed (it cannot catch
// that). The guardian is forked before anything else, in a session of its own (so a terminal's
// Ctrl-C or hangup does not reach it), and holds the read end of a pipe from the launcher. The
// launcher tells it each rank's process group as it starts it and when that group is gone; when
// the pipe reaches end of file without a dismiss() first (the launcher died, however), the
// guardian SIGKILLs every group still on its list and exits.

#include <sys/types.h>

#include "src/net/socket.h"

namespace ringlet::launcher {

class Guardian {
 public:
  // Forks the guardian. Call before any thread exists. Throws IoError when fork or pipe fail.
  static Guardian start();

  Guardian() = default;
  Guardian(Guardian&&) = default;
  Guardian& operator=(Guardian&&) = default;
  // Without dismiss() first, the guardian takes this as the launcher's death.
  ~Guardian() = default;

  pid_t pid() const { return pid_; }
  // Adds (watch) or removes (forget) a process group on the guardian's list. Never blocks for
  // long: a message is a few bytes on a pipe the guardian drains.
  void watch(pid_t group);
  void forget(pid_t group);
  // The job ended and the launcher cleaned up itself: the guardian exits without killing.
  void dismiss();

 private:
  void send(int op, pid_t group);

  net::Fd pipe_;
  pid_t pid_ = -1;
};

}  // namespace ringlet::launcher
