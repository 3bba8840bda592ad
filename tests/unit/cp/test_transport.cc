// The in-process transport's contract checks (NCCL's semantics, with buffers in flight poisoned) and
// the ring executor's argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <thread>

#include "cp/ring.h"
#include "cp_test_util.h"
#include "error_of.h"

using flexattn::test::error_of;

namespace {

using flexattn::Error;
using flexattn::cp::InProcessHub;
using flexattn::cp::Transport;
namespace cp = flexattn::cp;

TEST(InProcessTransport, BuffersInFlightArePoisonedAndSendsReadAtWait) {
  InProcessHub hub(2);
  double a_out = 1.5, a_in = 0, b_out = 2.5, b_in = 0;
  std::thread other([&] {
    Transport& t = hub.transport(1);
    t.group_start();
    t.send(&b_out, sizeof(double), 0);
    t.recv(&b_in, sizeof(double), 0);
    t.group_end();
    t.wait();
  });
  Transport& t = hub.transport(0);
  t.group_start();
  t.recv(&a_in, sizeof(double), 1);
  t.send(&a_out, sizeof(double), 1);
  t.group_end();
  EXPECT_TRUE(std::isnan(a_in));  // reading a recv buffer before wait() sees garbage
  a_out = 7.0;                    // writing a send buffer before wait() changes what is sent
  t.wait();
  other.join();
  EXPECT_EQ(a_in, 2.5);
  EXPECT_EQ(b_in, 7.0);
  EXPECT_EQ(hub.messages_sent(0), 1);
  EXPECT_EQ(hub.bytes_sent(1), int64_t(sizeof(double)));
}

TEST(InProcessTransport, ContractViolationsAreErrors) {
  InProcessHub hub(2, 0.2);
  Transport& t = hub.transport(0);
  char buf[8] = {};
  EXPECT_EQ(error_of([&] { t.send(buf, 8, 1); }),
            "in-process transport: rank 0 posted a send outside group_start/group_end");
  t.group_start();
  EXPECT_EQ(error_of([&] { t.group_start(); }),
            "in-process transport: rank 0 called group_start twice without group_end");
  EXPECT_EQ(error_of([&] { t.recv(buf, 8, 0); }),
            "in-process transport: rank 0 posted a recv to peer 0; peers are the other ranks of [0, 2)");
  EXPECT_EQ(error_of([&] { t.wait(); }), "in-process transport: rank 0 called wait inside a group");
  t.recv(buf, 8, 1);
  t.group_end();
  EXPECT_EQ(error_of([&] { t.group_end(); }), "in-process transport: rank 0 called group_end without group_start");
  EXPECT_EQ(error_of([&] { t.wait(); }),
            "in-process transport: rank 0 waited 0.2 s for 8 bytes from rank 1 that never came (the ranks' "
            "schedules disagree)");
  EXPECT_EQ(error_of([&] { hub.transport(2); }), "in-process transport: rank must be in [0, 2); got 2");
  EXPECT_EQ(error_of([] { InProcessHub bad(0); }), "in-process transport: world_size must be >= 1; got 0");
}

TEST(InProcessTransport, SizeMismatchAndAbort) {
  InProcessHub hub(2, 5.0);
  char buf[8] = {};
  Transport& t0 = hub.transport(0);
  Transport& t1 = hub.transport(1);
  t1.group_start();
  t1.send(buf, 4, 0);
  t1.group_end();
  t1.wait();
  t0.group_start();
  t0.recv(buf, 8, 1);
  t0.group_end();
  EXPECT_EQ(error_of([&] { t0.wait(); }),
            "in-process transport: rank 0 expected 8 bytes from rank 1 but the message holds 4");
  InProcessHub hub2(2, 30.0);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    hub2.abort();
  });
  Transport& u = hub2.transport(1);
  u.group_start();
  u.recv(buf, 8, 0);
  u.group_end();
  EXPECT_EQ(error_of([&] { u.wait(); }),
            "in-process transport: aborted while rank 1 waited for rank 0 (another rank failed)");
  aborter.join();
}

TEST(RingExecutor, ArgumentErrors) {
  const cp_test::Mask causal = [](int64_t, int64_t, int64_t q, int64_t kv) { return kv <= q; };
  const flexattn::BlockMask bm = flexattn::build_block_mask(flexattn::MaskFn(causal), 1, 1, 32, 32, 4, 4, 1);
  const cp::ShardPlan plan = cp::plan_shards(bm, 2, cp::Layout::zigzag);
  InProcessHub hub(2);
  char a[16], b[16];
  const cp::RingBuffers kv{{16, 16}, {a, b}};
  const auto nothing = [](const cp::RingStep&, const void*) {};
  EXPECT_EQ(error_of([&] { cp::run_ring_forward(plan, 0, hub.transport(1), kv, nothing); }),
            "run_ring_forward: the transport is rank 1 of 2 but the call is for rank 0 of the plan's 2");
  EXPECT_EQ(error_of([&] { cp::run_ring_forward(plan, 2, hub.transport(1), kv, nothing); }),
            "run_ring_forward: rank must be in [0, 2); got 2");
  const cp::RingBuffers short_list{{16}, {a, b}};
  EXPECT_EQ(error_of([&] { cp::run_ring_forward(plan, 0, hub.transport(0), short_list, nothing); }),
            "run_ring_forward: shard_bytes must list the 2 shards; got 1");
  const cp::RingBuffers one{{16, 16}, {a, nullptr}};
  EXPECT_EQ(error_of([&] { cp::run_ring_backward(plan, 0, hub.transport(0), kv, one, nullptr); }),
            "run_ring_backward: both ring buffers must be set");

  // The CPU ring checks the local tensors against the rank's chunks.
  const auto q = cp_test::random_tensor({1, 1, 32, 4}, 1), k = cp_test::random_tensor({1, 1, 16, 4}, 2);
  cp_test::ModFns mods;
  mods.mask_mod = causal;
  EXPECT_EQ(error_of([&] { cp::cpu_ring_forward(plan, 0, hub.transport(0), bm, q, k, k, mods); }),
            "cpu_ring_forward: q must hold rank 0's 16 rows (its chunks' q rows, gather_rank); got 32");
  const auto q16 = cp_test::random_tensor({1, 1, 16, 4}, 3), k8 = cp_test::random_tensor({1, 1, 8, 4}, 4);
  EXPECT_EQ(error_of([&] { cp::cpu_ring_forward(plan, 0, hub.transport(0), bm, q16, k8, k8, mods); }),
            "cpu_ring_forward: k and v must hold rank 0's shard of 16 positions (gather_rank); got k [1, 1, 8, 4], "
            "v [1, 1, 8, 4]");
  const auto lse = cp_test::random_tensor({1, 1, 15}, 5);
  EXPECT_EQ(error_of([&] {
              cp::cpu_ring_backward(plan, 0, hub.transport(0), bm, q16, q16, q16, q16, lse, q16, nullptr, mods);
            }),
            "cpu_ring_backward: lse must have shape [1, 1, 16] (the rank's rows); got [1, 1, 15]");
  const flexattn::BlockMask other = flexattn::build_block_mask(flexattn::MaskFn(causal), 1, 1, 32, 32, 8, 8, 1);
  EXPECT_EQ(error_of([&] { cp::cpu_ring_forward(plan, 0, hub.transport(0), other, q16, q16, q16, mods); }),
            "cpu_ring_forward: bm must be the mask the plan was made from (its B, H, lengths or block sizes differ)");
}

}  // namespace
