// Loading libnccl at run time: a missing library and one without the point-to-point entry points
// give clear errors, a stand-in library binds and answers through the public API, and (where NCCL is
// installed) the real library binds. No GPU needed.
#include "cp/nccl_api.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "flexattn/cp_nccl.h"
#include "flexattn/error.h"

namespace {

namespace cp = flexattn::cp;

class ScopedLibnccl {
 public:
  explicit ScopedLibnccl(const std::string& path) {
    const char* old = std::getenv("FLEXATTN_LIBNCCL");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("FLEXATTN_LIBNCCL", path.c_str(), 1);
  }
  ~ScopedLibnccl() {
    if (had_)
      setenv("FLEXATTN_LIBNCCL", old_.c_str(), 1);
    else
      unsetenv("FLEXATTN_LIBNCCL");
  }

 private:
  bool had_ = false;
  std::string old_;
};

std::string message_of(void (*fn)()) {
  try {
    fn();
  } catch (const flexattn::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NcclApi, MissingLibraryGivesOneClearError) {
  ScopedLibnccl env("/nonexistent/libnccl.so.2");
  std::string error;
  EXPECT_EQ(cp::try_nccl_api(&error), nullptr);
  const std::string head = "NCCL not found (/nonexistent/libnccl.so.2): ";
  const std::string tail =
      "; context parallelism over NCCL needs libnccl (install NCCL 2.x or set FLEXATTN_LIBNCCL) (path from "
      "FLEXATTN_LIBNCCL)";
  EXPECT_EQ(error.rfind(head, 0), 0u) << error;
  ASSERT_GE(error.size(), tail.size());
  EXPECT_EQ(error.substr(error.size() - tail.size()), tail) << error;
  EXPECT_EQ(message_of([] { cp::nccl_api(); }), error);
  EXPECT_EQ(message_of([] { cp::nccl_unique_id(); }), error);
  // Without a library, result codes are still named.
  EXPECT_EQ(cp::nccl_error_text(5), "ncclInvalidUsage");
  EXPECT_EQ(cp::nccl_error_text(42), "ncclResult_t 42");
}

TEST(NcclApi, LibraryWithoutPointToPointIsRejected) {
  ScopedLibnccl env(FAKE_NCCL_OLD);
  std::string error;
  EXPECT_EQ(cp::try_nccl_api(&error), nullptr);
  EXPECT_EQ(error, std::string("NCCL library ") + FAKE_NCCL_OLD +
                       " lacks entry points flexattn needs (ncclSend, ncclRecv); context parallelism needs NCCL 2.7 "
                       "or newer (path from FLEXATTN_LIBNCCL)");
}

TEST(NcclApi, StandInLibraryBinds) {
  ScopedLibnccl env(FAKE_NCCL);
  std::string error;
  const cp::NcclApi* api = cp::try_nccl_api(&error);
  ASSERT_NE(api, nullptr) << error;
  EXPECT_NE(api->path.find("cp_fake_nccl"), std::string::npos) << api->path;
  int version = 0;
  EXPECT_EQ(api->ncclGetVersion(&version), cp::ncclSuccess);
  EXPECT_EQ(version, 99999);
  EXPECT_EQ(&cp::nccl_api(), api);  // opened once per path
  const flexattn::cp::NcclUniqueId id = cp::nccl_unique_id();
  for (int i = 0; i < 128; ++i) ASSERT_EQ(id.bytes[i], char(i * 7 + 1)) << i;
  EXPECT_EQ(cp::nccl_error_text(4), "ncclInvalidArgument (fake: invalid argument)");
  EXPECT_EQ(message_of([] { cp::nccl_check(4, "ncclCommInitRank(rank 3 of 2)"); }),
            "ncclCommInitRank(rank 3 of 2) failed: ncclInvalidArgument (fake: invalid argument)");
  cp::nccl_check(cp::ncclSuccess, "nothing");
}

#ifdef REAL_NCCL
TEST(NcclApi, InstalledLibraryBinds) {
  ScopedLibnccl env(REAL_NCCL);
  std::string error;
  const cp::NcclApi* api = cp::try_nccl_api(&error);
  ASSERT_NE(api, nullptr) << error;
  int version = 0;
  ASSERT_EQ(api->ncclGetVersion(&version), cp::ncclSuccess);
  EXPECT_GE(version, 20700) << api->path;  // 2.7: ncclSend/ncclRecv
  EXPECT_STREQ(api->ncclGetErrorString(cp::ncclSuccess), "no error");
}
#endif

}  // namespace
