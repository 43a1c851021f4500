#include "ringlet/communicator.h"
#include "src/config.h"

namespace ringlet {

CommunicatorOptions CommunicatorOptions::fromEnvironment() {
  const auto& env = config::environment();
  CommunicatorOptions options;
  if (env.timeout) options.timeout = *env.timeout;
  if (!env.transport.empty()) options.transport = env.transport;
  options.socketIfname = env.socketIfname;
  options.socketAddress = env.socketAddress;
  if (env.segmentBytes) options.segmentBytes = *env.segmentBytes;
  if (env.smallMessageBytes) options.smallMessageBytes = *env.smallMessageBytes;
  return options;
}

}  // namespace ringlet
