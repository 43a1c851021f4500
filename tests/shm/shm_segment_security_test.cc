// Shared-memory segments against a hostile local user: names from the store are checked before
// any open or unlink and never unlinked, and a peer's segment must be a regular file of this
// user with mode 0600 (a swapped-in file, a symlink, a FIFO are refused by name).

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "ringlet/error.h"
#include "src/net/socket.h"
#include "tests/support/ranks.h"
#include "transports/shm/shm_segment.h"

namespace ringlet::transport::shm {
namespace {

class ShmSegmentSecurity : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = ringlet::testing::makeTempDir("ringlet-shm-security"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string touch(const std::string& name, mode_t mode, size_t bytes = 4096) {
    const std::string path = dir_ + "/" + name;
    net::Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600));
    EXPECT_TRUE(fd.valid()) << path;
    EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(bytes)), 0);
    EXPECT_EQ(::fchmod(fd.get(), mode), 0);
    return path;
  }

  void expectRefused(const std::string& name, const std::string& text) {
    try {
      Segment::open(dir_, name, 0, 1);
      ADD_FAILURE() << "segment '" << name << "' was opened";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }

  std::string dir_;
  const SegmentGeometry geometry_{.slotCount = 4, .slotBytes = 4096};
};

// A store key "name:<file>" used to make the opener delete any file of the directory.
TEST_F(ShmSegmentSecurity, NameFromTheStoreIsCheckedAndNeverUnlinked) {
  const std::string victim = touch("victim", 0600);
  expectRefused("victim", "not a ringlet segment name");
  expectRefused("../victim", "not a ringlet segment name");
  expectRefused("ringlet-x/../../victim", "not a ringlet segment name");
  expectRefused("", "not a ringlet segment name");
  EXPECT_TRUE(std::filesystem::exists(victim));
  // A file with our prefix that is not a segment: refused, and still there.
  const std::string fake = touch("ringlet-fake-0-1-0000000000000000", 0600, 1 << 20);
  expectRefused("ringlet-fake-0-1-0000000000000000", "not a ringlet segment");
  EXPECT_TRUE(std::filesystem::exists(fake));
}

TEST_F(ShmSegmentSecurity, SegmentMustBeThisUsersFileWithMode0600) {
  touch("ringlet-open-0-1-0000000000000001", 0666);
  expectRefused("ringlet-open-0-1-0000000000000001", "mode 0666");
  touch("ringlet-other-0-1-0000000000000002", 0600);
  if (::geteuid() == 0) {  // only root can give a file away
    ASSERT_EQ(::chown((dir_ + "/ringlet-other-0-1-0000000000000002").c_str(), 65534, 65534), 0);
    expectRefused("ringlet-other-0-1-0000000000000002", "belongs to uid 65534");
  }
  const std::string target = touch("ringlet-target-0-1-0000000000000003", 0600);
  ASSERT_EQ(::symlink(target.c_str(), (dir_ + "/ringlet-link-0-1-0000000000000004").c_str()), 0);
  expectRefused("ringlet-link-0-1-0000000000000004", "cannot open");
  ASSERT_EQ(::mkfifo((dir_ + "/ringlet-fifo-0-1-0000000000000005").c_str(), 0600), 0);
  expectRefused("ringlet-fifo-0-1-0000000000000005", "not a regular file");
}

// A segment swapped in after the creator's check: a copy made by someone else fails the owner
// and mode checks; the genuine one opens, and only its creator removes the file.
TEST_F(ShmSegmentSecurity, GenuineSegmentOpensAndOnlyItsCreatorUnlinksIt) {
  std::string noRoom;
  const std::string name = segmentName("job", 0, 1);
  Segment created = Segment::create(dir_, name, geometry_, 0, 1, &noRoom);
  ASSERT_TRUE(created.valid()) << noRoom;
  struct stat st {};
  ASSERT_EQ(::stat((dir_ + "/" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  Segment opened = Segment::open(dir_, name, 0, 1);
  EXPECT_TRUE(opened.valid());
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + name)) << "the opener unlinked it";
  created.unlinkFile();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/" + name));
  // Creating over an existing name (or a symlink planted there) fails instead of reusing it.
  const std::string planted = segmentName("job", 0, 2);
  ASSERT_EQ(::symlink((dir_ + "/elsewhere").c_str(), (dir_ + "/" + planted).c_str()), 0);
  EXPECT_THROW(Segment::create(dir_, planted, geometry_, 0, 2, &noRoom), IoError);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/elsewhere"));
}

// Each side's liveness lock is seen by the other side until the holder's descriptors of the file
// close (as at its death, in whatever PID namespace), also after the file is unlinked.
TEST_F(ShmSegmentSecurity, LivenessLockIsSeenUntilItsHolderCloses) {
  std::string noRoom;
  const std::string name = segmentName("job", 0, 1);
  Segment created = Segment::create(dir_, name, geometry_, 0, 1, &noRoom);
  ASSERT_TRUE(created.valid()) << noRoom;
  ASSERT_TRUE(created.holdLivenessLock(0));
  Segment opened = Segment::open(dir_, name, 0, 1);
  EXPECT_TRUE(livenessLockHeld(opened.fd(), 0));
  EXPECT_FALSE(livenessLockHeld(created.fd(), 1)) << "no lock taken yet";
  ASSERT_TRUE(opened.holdLivenessLock(1));
  created.unlinkFile();
  EXPECT_TRUE(livenessLockHeld(created.fd(), 1));
  opened = Segment();
  EXPECT_FALSE(livenessLockHeld(created.fd(), 1)) << "the lock outlived its holder";
}

}  // namespace
}  // namespace ringlet::transport::shm
