#pragma once
// ringlet reports every failure by throwing one of these. Library code never exits or aborts.

#include <stdexcept>
#include <string>

namespace ringlet {

enum class ErrorCode {
  kInvalidArgument = 1,  // the caller passed something wrong; nothing was sent
  kIo = 2,               // a socket, file or shared-memory operation failed
  kTimeout = 3,          // a wait passed its deadline; the message says what it waited for
  kPeer = 4,             // a peer died, closed its link, or aborted
  kMismatch = 5,         // ranks issued different calls at the same sequence number
  kCuda = 6,             // a CUDA runtime call failed
  kAborted = 7,          // the communicator was aborted or is unusable after an earlier error
  kInternal = 8,         // a broken invariant inside ringlet (a bug: please report it)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

class InvalidArgument : public Error {
 public:
  explicit InvalidArgument(const std::string& m) : Error(ErrorCode::kInvalidArgument, m) {}
};
class IoError : public Error {
 public:
  explicit IoError(const std::string& m) : Error(ErrorCode::kIo, m) {}
};
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& m) : Error(ErrorCode::kTimeout, m) {}
};
// A peer failed. peer() is the rank whose failure this is (not always the rank we talk to: an
// abort forwarded around the ring keeps naming the rank where it started), or -1 if unknown.
class PeerError : public Error {
 public:
  PeerError(int peer, const std::string& m, bool aborted = false)
      : Error(ErrorCode::kPeer, m), peer_(peer), aborted_(aborted) {}
  int peer() const noexcept { return peer_; }
  // True when the peer reported a failure (its communicator failed, or abort() was called);
  // false when it closed its end, exited, or its connection broke.
  bool aborted() const noexcept { return aborted_; }

 private:
  int peer_;
  bool aborted_;
};
class MismatchError : public Error {
 public:
  explicit MismatchError(const std::string& m) : Error(ErrorCode::kMismatch, m) {}
};
class CudaError : public Error {
 public:
  explicit CudaError(const std::string& m) : Error(ErrorCode::kCuda, m) {}
};
class AbortedError : public Error {
 public:
  explicit AbortedError(const std::string& m) : Error(ErrorCode::kAborted, m) {}
};

}  // namespace ringlet
