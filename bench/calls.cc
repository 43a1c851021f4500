#include "bench/calls.h"

namespace ringlet::bench {

void callRinglet(Communicator& comm, BenchOp op, const CallArgs& a) {
  switch (op) {
    case BenchOp::kAllreduce:
      comm.allreduce(a.send, a.recv, a.count, a.type, a.op);
      return;
    case BenchOp::kBroadcast:
      comm.broadcast(a.recv, a.count, a.type, a.root);
      return;
    case BenchOp::kReduce:
      comm.reduce(a.send, a.recv, a.count, a.type, a.op, a.root);
      return;
    case BenchOp::kAllgather:
      comm.allgather(a.send, a.recv, a.count, a.type);
      return;
    case BenchOp::kReduceScatter:
      comm.reduceScatter(a.send, a.recv, a.count, a.type, a.op);
      return;
    case BenchOp::kAllToAll:
      comm.allToAll(a.send, a.recv, a.count, a.type);
      return;
    case BenchOp::kGather:
      comm.gather(a.send, a.recv, a.count, a.type, a.root);
      return;
    case BenchOp::kScatter:
      comm.scatter(a.send, a.recv, a.count, a.type, a.root);
      return;
    case BenchOp::kBarrier:
      comm.barrier();
      return;
    case BenchOp::kSendRecv: {
      const int next = sendPeer(comm.rank(), comm.size());
      const int prev = recvPeer(comm.rank(), comm.size());
      comm.sendrecv(a.send, a.count, next, a.recv, a.count, prev, a.type);
      return;
    }
    case BenchOp::kAllgatherv:
      comm.allgatherv(a.send, a.recv, a.counts, a.type);
      return;
    case BenchOp::kGatherv:
      comm.gatherv(a.send, a.recv, a.counts, a.type, a.root);
      return;
    case BenchOp::kReduceScatterv:
      comm.reduceScatterv(a.send, a.recv, a.counts, a.type, a.op);
      return;
    case BenchOp::kScatterv:
      comm.scatterv(a.send, a.counts, a.recv, a.type, a.root);
      return;
    case BenchOp::kAllToAllv:  // the weights are symmetric: what r sends to q, q sends to r
      comm.allToAllv(a.send, a.counts, a.recv, a.counts, a.type);
      return;
  }
}

void issueRinglet(Communicator& comm, BenchOp op, const CallArgs& a, std::vector<Work>& works) {
  switch (op) {
    case BenchOp::kAllreduce:
      works.push_back(comm.allreduceAsync(a.send, a.recv, a.count, a.type, a.op));
      return;
    case BenchOp::kBroadcast:
      works.push_back(comm.broadcastAsync(a.recv, a.count, a.type, a.root));
      return;
    case BenchOp::kReduce:
      works.push_back(comm.reduceAsync(a.send, a.recv, a.count, a.type, a.op, a.root));
      return;
    case BenchOp::kAllgather:
      works.push_back(comm.allgatherAsync(a.send, a.recv, a.count, a.type));
      return;
    case BenchOp::kReduceScatter:
      works.push_back(comm.reduceScatterAsync(a.send, a.recv, a.count, a.type, a.op));
      return;
    case BenchOp::kAllToAll:
      works.push_back(comm.allToAllAsync(a.send, a.recv, a.count, a.type));
      return;
    case BenchOp::kGather:
      works.push_back(comm.gatherAsync(a.send, a.recv, a.count, a.type, a.root));
      return;
    case BenchOp::kScatter:
      works.push_back(comm.scatterAsync(a.send, a.recv, a.count, a.type, a.root));
      return;
    case BenchOp::kBarrier:
      works.push_back(comm.barrierAsync());
      return;
    case BenchOp::kSendRecv: {
      const int next = sendPeer(comm.rank(), comm.size());
      const int prev = recvPeer(comm.rank(), comm.size());
      works.push_back(comm.sendrecvAsync(a.send, a.count, next, a.recv, a.count, prev, a.type));
      return;
    }
    case BenchOp::kAllgatherv:
      works.push_back(comm.allgathervAsync(a.send, a.recv, a.counts, a.type));
      return;
    case BenchOp::kGatherv:
      works.push_back(comm.gathervAsync(a.send, a.recv, a.counts, a.type, a.root));
      return;
    case BenchOp::kReduceScatterv:
      works.push_back(comm.reduceScattervAsync(a.send, a.recv, a.counts, a.type, a.op));
      return;
    case BenchOp::kScatterv:
      works.push_back(comm.scattervAsync(a.send, a.counts, a.recv, a.type, a.root));
      return;
    case BenchOp::kAllToAllv:
      works.push_back(comm.allToAllvAsync(a.send, a.counts, a.recv, a.counts, a.type));
      return;
  }
}

}  // namespace ringlet::bench
