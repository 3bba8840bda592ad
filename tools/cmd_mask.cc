// flexattn mask: build the block mask of a mask mod and show it.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "execute.h"
#include "flexattn/error.h"

namespace flexattn::cli {

int cmd_mask(const std::vector<std::string>& argv) {
  std::vector<FlagSpec> flags;
  for (const FlagSpec& f : problem_flags())
    if (f.name == "-B" || f.name == "-H" || f.name == "-Q" || f.name == "--kv" || f.name == "--mask" ||
        f.name == "--mask-expr" || f.name == "--buffer" || f.name == "--scalar" || f.name == "--seed")
      flags.push_back(f);
  flags.push_back({"--block", "N", false, "block size (default 128)"});
  flags.push_back({"--rows", "N", false, "at most N x N cells per (b, h) grid (default 20)"});
  flags.push_back({"--unicode", "", false, "draw with block characters instead of ascii"});
  Args args("mask", flags);
  args.parse(argv);
  if (args.help_requested()) {
    std::cout << "usage: flexattn mask --mask NAME[:ARGS] | --mask-expr TEXT [flags]\n"
                 "Builds the block mask (torch create_block_mask semantics) and prints it: '#' full tile (mask\n"
                 "skipped), '+' partial tile (mask evaluated), '.' skipped tile; then block counts and sparsity.\n\n"
                 "flags:\n"
              << args.usage() << "\nmasks:\n" << registry_help();
    return 0;
  }
  reject_positional(args, "mask");
  ProblemConfig config = problem_config(args);
  check(!config.mask_spec.empty() || !config.mask_expr.empty(), "mask: give --mask NAME[:ARGS] or --mask-expr TEXT");
  config.make_inputs = false;
  const int block = int(args.get_int("--block", 128, 1, 1 << 20));
  const int rows = int(args.get_int("--rows", 20, 1, 1000));
  const Problem p = make_problem(config);
  const BlockMask bm = make_block_mask(p, block);
  const BlockMaskStats st = block_mask_stats(bm);
  std::printf("%s  Q=%lld KV=%lld  blocks %dx%d  mask dims B=%lld H=%lld\n", p.label.c_str(),
              (long long)bm.q_len, (long long)bm.kv_len, block, block, (long long)bm.B, (long long)bm.H);
  std::cout << to_string(bm, rows, !args.has("--unicode"), 4);
  std::printf("tiles: %lld partial, %lld full, %lld skipped of %lld (nq=%lld x nkv=%lld per b,h)\n",
              (long long)st.partial, (long long)st.full, (long long)st.skipped, (long long)st.total, (long long)bm.nq,
              (long long)bm.nkv);
  std::printf("sparsity: %.2f%%\n", sparsity(bm));
  return 0;
}

}  // namespace flexattn::cli
