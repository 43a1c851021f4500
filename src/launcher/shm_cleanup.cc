#include "src/launcher/shm_cleanup.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

#include "src/config.h"
#include "src/net/socket.h"

namespace ringlet::launcher {

// The shm transport's segment names: "ringlet-" + the job id with every character outside
// [A-Za-z0-9_.-] replaced by '_', cut at 64 characters + "-<low>-<high>-<nonce>"
// (transports/shm/shm_segment.cc, segmentName); launcher_faults_test checks that the two agree.
std::string segmentPrefix(const std::string& jobId) {
  std::string job;
  for (char c : jobId) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '-' || c == '.';
    job += keep ? c : '_';
    if (job.size() >= 64) break;
  }
  if (job.empty()) job = "job";
  return "ringlet-" + job + "-";
}

std::string jobSegmentDir() {
  // Read here and not through the transport: the launcher does not link the transports, and it
  // only needs to know where the ranks it starts will look (they inherit this environment).
  return config::getenv("RINGLET_SHM_DIR").value_or("/dev/shm");
}

int removeJobSegments(const std::string& dir, const std::string& jobId) {
  const std::string prefix = segmentPrefix(jobId);
  net::Fd dirFd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!dirFd.valid()) return 0;
  DIR* listing = fdopendir(dup(dirFd.get()));
  if (listing == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = readdir(listing)) {
    const std::string_view name(entry->d_name);
    if (name.substr(0, prefix.size()) != prefix || name.find('/') != std::string_view::npos) {
      continue;
    }
    struct stat st {};
    if (fstatat(dirFd.get(), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
    if (unlinkat(dirFd.get(), entry->d_name, 0) == 0) ++removed;
  }
  closedir(listing);
  return removed;
}

}  // namespace ringlet::launcher
