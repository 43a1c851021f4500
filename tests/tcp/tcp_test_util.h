#pragma once
// Helpers for the tcp transport tests: contexts built by hand, wait contexts with short
// deadlines, and message data that depends on sender, message and position.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringlet/communicator.h"
#include "ringlet/store.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/transport.h"

namespace ringlet::transport::tcp::testing {

// Streams per rank pair for the contexts below (the link tests run with 1 and with several).
inline int& testStreams() {
  static int streams = 1;
  return streams;
}
// Whether those contexts seal their links (RINGLET_SOCKET_ENCRYPT=1).
inline bool& testSealed() {
  static bool sealed = false;
  return sealed;
}

inline TransportContext makeContext(int rank, int size, std::shared_ptr<Store> store,
                                    std::string jobId = "tcp-test-job",
                                    std::string secret = "tcp-test-secret") {
  TransportContext context;
  context.rank = rank;
  context.size = size;
  context.store = std::move(store);
  context.jobId = std::move(jobId);
  context.secret = std::move(secret);
  if (testStreams() != 1) context.settings["socket_streams"] = std::to_string(testStreams());
  // (A string made apart: g++ 12 at -O3 warns, wrongly, of an overlap in assign("1") here.)
  if (testSealed()) context.settings["socket_encrypt"] = std::string(1, '1');
  for (int r = 0; r < size; ++r) {
    context.peers.push_back(PeerInfo{r, "localhost", "same-host", 1, "pid:[1]", 0});
  }
  return context;
}

// One rank's transport and its links, with the raw pointers a WaitContext wants.
struct Endpoint {
  std::unique_ptr<TcpTransport> transport;
  std::vector<std::unique_ptr<Link>> links;  // in the order of the peers passed to connect()
  std::vector<Link*> raw;

  Link& to(size_t index) { return *links.at(index); }
};

inline Endpoint connectAll(TransportContext context, std::vector<int> peers,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10),
                           std::optional<Backoff> backoff = std::nullopt) {
  Endpoint e;
  e.transport = std::make_unique<TcpTransport>(std::move(context), backoff);
  e.links = e.transport->connect(peers, Clock::now() + timeout);
  for (auto& link : e.links) e.raw.push_back(link.get());
  return e;
}

// Every other rank of `size`, ascending.
inline std::vector<int> othersOf(int rank, int size) {
  std::vector<int> peers;
  for (int r = 0; r < size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  return peers;
}

inline WaitContext makeWait(int rank, const std::vector<Link*>& links,
                            std::chrono::milliseconds timeout = std::chrono::seconds(10),
                            std::string_view op = "tcptest", uint64_t seq = 1) {
  WaitContext wait;
  wait.deadline = Clock::now() + timeout;
  wait.op = op;
  wait.seq = seq;
  wait.rank = rank;
  wait.links = links;
  return wait;
}

// Byte j of message `message` from `sender`: every position, sender and message differ.
inline std::byte patternByte(int sender, int message, size_t j) {
  return static_cast<std::byte>((j * 131 + j / 251 + static_cast<size_t>(sender) * 7 +
                                 static_cast<size_t>(message) * 13 + 1) &
                                0xff);
}

inline std::vector<std::byte> pattern(int sender, int message, size_t bytes) {
  std::vector<std::byte> data(bytes);
  for (size_t j = 0; j < bytes; ++j) data[j] = patternByte(sender, message, j);
  return data;
}

// Index of the first wrong byte, or -1 when all are right.
inline long firstWrong(const std::byte* data, int sender, int message, size_t bytes) {
  for (size_t j = 0; j < bytes; ++j) {
    if (data[j] != patternByte(sender, message, j)) return static_cast<long>(j);
  }
  return -1;
}

inline const std::vector<size_t>& assortedSizes() {
  static const std::vector<size_t> sizes{0, 1, 7, 65536, 1000003, 8, 4096, 33000};
  return sizes;
}

}  // namespace ringlet::transport::tcp::testing
