#pragma once
// Shared-memory files a job leaves behind when its ranks are killed while they set up links
// (the shm transport unlinks each segment once both ranks have mapped it; a rank stopped in
// between cannot). The launcher knows the job id the segments are named after and removes them
// once every rank is gone.

#include <string>

namespace ringlet::launcher {

// "ringlet-<job>-": the start of the names of every segment of job `jobId`.
std::string segmentPrefix(const std::string& jobId);

// Removes the regular files owned by this user in `dir` whose names start with the shm
// transport's prefix for `jobId` ("ringlet-<job>-"); never follows links. Returns how many it
// removed.
int removeJobSegments(const std::string& dir, const std::string& jobId);

// The directory the ranks put their segments in: RINGLET_SHM_DIR as the ranks inherit it, else
// /dev/shm.
std::string jobSegmentDir();

}  // namespace ringlet::launcher
