//===- fragment_layout_test.cc - Host emulation of the GEMM's fragment loads -===//
//
// The generated GEMMs load mma.sync fragments with ldmatrix from swizzled
// stage tiles. This test emulates that on the host: stage tiles are filled
// through the same tile_offset() as the prelude's, each lane's ldmatrix row
// address comes from the same formula as the generated source (the test
// checks the source spells it that way), ldmatrix hands rows to lanes as
// the PTX ISA describes, and every register element must be the (row, col)
// the PTX ISA's fragment tables ("Matrix fragments for mma.m16n8k16 /
// mma.m16n8k8") assign to that lane. It also checks that the 8 rows of
// every ldmatrix phase fall in 8 different bank groups (no conflicts).
//
//===----------------------------------------------------------------------===//
#include <map>
#include <regex>
#include <set>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "target/cuda/codegen/cuda_codegen.h"
#include "tests/cuda_codegen/kernels.h"

namespace kiln::target::cuda {
namespace {

// The prelude's tile_offset, on the host.
uint32_t TileOffset(int lines, int panel, int line, int byte) {
  const uint32_t b = uint32_t(byte / panel) * uint32_t(lines * panel) + uint32_t(line * panel + byte % panel);
  return b ^ (((b >> 7) & uint32_t(panel / 16 - 1)) << 4);
}

// A stage tile whose every element remembers its logical (row, col) of
// the operand ([m, k] for A, [k, n] for B).
struct Tile {
  int lines, contig, elem, panel;
  bool mn_major;  // lines run along K
  std::map<uint32_t, std::pair<int, int>> at;  // byte offset -> logical element
  Tile(int lines_, int contig_, int elem_, bool mn, bool is_a) : lines(lines_), contig(contig_), elem(elem_), mn_major(mn) {
    const int line_bytes = contig * elem;
    panel = line_bytes % 128 == 0 ? 128 : line_bytes % 64 == 0 ? 64 : line_bytes % 32 == 0 ? 32 : 16;
    for (int l = 0; l < lines; ++l) {
      for (int c = 0; c < contig; ++c) {
        // Storage (line, c) -> logical: A K-major: (m=l, k=c); A MN-major: (m=c, k=l);
        // B MN-major: (k=l, n=c); B K-major: (k=c, n=l).
        std::pair<int, int> logical = is_a ? (mn ? std::make_pair(c, l) : std::make_pair(l, c))
                                           : (mn ? std::make_pair(l, c) : std::make_pair(c, l));
        const uint32_t off = TileOffset(lines, panel, l, c * elem);
        EXPECT_FALSE(at.count(off)) << "tile_offset is not one-to-one";
        at[off] = logical;
      }
    }
  }
  std::pair<int, int> Read(uint32_t byte) const {
    auto it = at.find(byte);
    EXPECT_TRUE(it != at.end()) << "read outside the tile at " << byte;
    return it == at.end() ? std::make_pair(-1, -1) : it->second;
  }
};

// ldmatrix (.x1 of matrix j): rows given by lanes 8j..8j+7 as (line, byte)
// addresses; returns what lane `lane` receives: element h (0, 1) of the
// 16-bit pair, as logical coordinates. trans: the 8x8 matrix is transposed.
std::pair<int, int> Ldmatrix(const Tile& t, const std::pair<int, int> (&row_addr)[8], int lane, int h, bool trans) {
  int row, col;
  if (!trans) {
    row = lane / 4;
    col = 2 * (lane % 4) + h;
  } else {
    row = 2 * (lane % 4) + h;
    col = lane / 4;
  }
  const auto [line, byte] = row_addr[row];
  return t.Read(TileOffset(t.lines, t.panel, line, byte + col * 2));
}
// 32-bit view (tf32): lane receives element (lane / 4, lane % 4) of an 8x4 matrix.
std::pair<int, int> Ldmatrix32(const Tile& t, const std::pair<int, int> (&row_addr)[8], int lane) {
  const auto [line, byte] = row_addr[lane / 4];
  return t.Read(TileOffset(t.lines, t.panel, line, byte + (lane % 4) * 4));
}

void ExpectConflictFree(const Tile& t, const std::pair<int, int> (&row_addr)[8]) {
  std::set<uint32_t> groups;
  for (const auto& [line, byte] : row_addr) groups.insert(TileOffset(t.lines, t.panel, line, byte) / 16 % 8);
  EXPECT_EQ(groups.size(), 8u) << "bank conflict in an ldmatrix phase";
}

// PTX ISA fragment tables (g = lane / 4, t = lane % 4).
std::pair<int, int> A16(int lane, int reg, int h) { return {lane / 4 + 8 * (reg % 2), 2 * (lane % 4) + h + 8 * (reg / 2)}; }
std::pair<int, int> B16(int lane, int reg, int h) { return {2 * (lane % 4) + h + 8 * reg, lane / 4}; }
std::pair<int, int> A32(int lane, int reg) { return {lane / 4 + 8 * (reg % 2), lane % 4 + 4 * (reg / 2)}; }
std::pair<int, int> B32(int lane, int reg) { return {lane % 4 + 4 * reg, lane / 4}; }

// The generated address formulas, per providing lane `p` (see cuda_gemm.cc).
// m0/n0: the warp's offset; ks: the K step; returns (line, byte).
std::pair<int, int> AddrA_Kmajor(int p, int m0, int mi, int ks) { return {m0 + mi * 16 + p % 16, ks * 32 + p / 16 * 16}; }
std::pair<int, int> AddrA_MNmajor16(int p, int m0, int mi, int ks) {
  return {ks * 16 + p / 16 * 8 + p % 8, (m0 + mi * 16 + p / 8 % 2 * 8) * 2};
}
std::pair<int, int> AddrB_MNmajor16(int p, int n0, int ni, int ks) {
  return {ks * 16 + p / 8 % 2 * 8 + p % 8, (n0 + ni * 8 + p / 16 * 8) * 2};
}
std::pair<int, int> AddrB_Kmajor(int p, int n0, int ni, int ks) { return {n0 + ni * 8 + p / 16 * 8 + p % 8, ks * 32 + p / 8 % 2 * 16}; }

TEST(FragmentLayout, F16AKmajorLdmatrixX4) {
  Tile t(128, 32, 2, false, true);  // As [128 x 32] f16, K contiguous
  for (int mi = 0; mi < 2; ++mi)
    for (int ks = 0; ks < 2; ++ks)
      for (int j = 0; j < 4; ++j) {
        std::pair<int, int> rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = AddrA_Kmajor(8 * j + r, 64, mi, ks);
        ExpectConflictFree(t, rows);
        for (int lane = 0; lane < 32; ++lane)
          for (int h = 0; h < 2; ++h) {
            auto want = A16(lane, j, h);
            EXPECT_EQ(Ldmatrix(t, rows, lane, h, false), std::make_pair(64 + mi * 16 + want.first, ks * 16 + want.second));
          }
      }
}

TEST(FragmentLayout, F16AMnMajorLdmatrixX4Trans) {
  Tile t(64, 128, 2, true, true);  // As stored [k=64][m=128]
  for (int ks = 0; ks < 4; ++ks)
    for (int j = 0; j < 4; ++j) {
      std::pair<int, int> rows[8];
      for (int r = 0; r < 8; ++r) rows[r] = AddrA_MNmajor16(8 * j + r, 32, 1, ks);
      ExpectConflictFree(t, rows);
      for (int lane = 0; lane < 32; ++lane)
        for (int h = 0; h < 2; ++h) {
          auto want = A16(lane, j, h);
          EXPECT_EQ(Ldmatrix(t, rows, lane, h, true), std::make_pair(32 + 16 + want.first, ks * 16 + want.second));
        }
    }
}

TEST(FragmentLayout, F16BMnMajorLdmatrixX4Trans) {
  Tile t(32, 128, 2, true, false);  // Bs [k=32][n=128]
  for (int ni = 0; ni < 8; ni += 2)
    for (int ks = 0; ks < 2; ++ks)
      for (int j = 0; j < 4; ++j) {
        std::pair<int, int> rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = AddrB_MNmajor16(8 * j + r, 64, ni, ks);
        ExpectConflictFree(t, rows);
        // register j: n tile ni + j/2, B register j%2
        for (int lane = 0; lane < 32; ++lane)
          for (int h = 0; h < 2; ++h) {
            auto want = B16(lane, j % 2, h);
            EXPECT_EQ(Ldmatrix(t, rows, lane, h, true),
                      std::make_pair(ks * 16 + want.first, 64 + (ni + j / 2) * 8 + want.second));
          }
      }
}

TEST(FragmentLayout, F16BKmajorLdmatrixX4) {
  Tile t(64, 64, 2, false, false);  // Bs stored [n=64][k=64]
  for (int ni = 0; ni < 4; ni += 2)
    for (int ks = 0; ks < 4; ++ks)
      for (int j = 0; j < 4; ++j) {
        std::pair<int, int> rows[8];
        for (int r = 0; r < 8; ++r) rows[r] = AddrB_Kmajor(8 * j + r, 32, ni, ks);
        ExpectConflictFree(t, rows);
        for (int lane = 0; lane < 32; ++lane)
          for (int h = 0; h < 2; ++h) {
            auto want = B16(lane, j % 2, h);
            EXPECT_EQ(Ldmatrix(t, rows, lane, h, false),
                      std::make_pair(ks * 16 + want.first, 32 + (ni + j / 2) * 8 + want.second));
          }
      }
}

TEST(FragmentLayout, Tf32KmajorLdmatrixAsPairsOf16Bit) {
  Tile ta(64, 32, 4, false, true);   // As [64 x 32] f32, K contiguous
  Tile tb(64, 32, 4, false, false);  // Bs stored [n=64][k=32]
  for (int ks = 0; ks < 4; ++ks)
    for (int j = 0; j < 4; ++j) {
      std::pair<int, int> ra[8], rb[8];
      for (int r = 0; r < 8; ++r) {
        ra[r] = AddrA_Kmajor(8 * j + r, 0, 1, ks);
        rb[r] = AddrB_Kmajor(8 * j + r, 0, 2, ks);
      }
      ExpectConflictFree(ta, ra);
      ExpectConflictFree(tb, rb);
      for (int lane = 0; lane < 32; ++lane) {
        auto wa = A32(lane, j);
        EXPECT_EQ(Ldmatrix32(ta, ra, lane), std::make_pair(16 + wa.first, ks * 8 + wa.second));
        auto wb = B32(lane, j % 2);
        EXPECT_EQ(Ldmatrix32(tb, rb, lane), std::make_pair(ks * 8 + wb.first, (2 + j / 2) * 8 + wb.second));
      }
    }
}

TEST(FragmentLayout, Tf32MnMajorSharedLoads) {
  // A stored [k][m]: register r of lane at line ks*8 + tig + 4*(r/2), byte (m0 + mi*16 + gid + 8*(r%2)) * 4.
  Tile ta(32, 64, 4, true, true);
  Tile tb(32, 64, 4, true, false);
  for (int lane = 0; lane < 32; ++lane) {
    const int gid = lane / 4, tig = lane % 4;
    for (int r = 0; r < 4; ++r) {
      auto got = ta.Read(TileOffset(ta.lines, ta.panel, 8 + tig + r / 2 * 4, (32 + gid + r % 2 * 8) * 4));
      auto want = A32(lane, r);
      EXPECT_EQ(got, std::make_pair(32 + want.first, 8 + want.second));
    }
    for (int r = 0; r < 2; ++r) {
      auto got = tb.Read(TileOffset(tb.lines, tb.panel, 8 + tig + r * 4, (16 + gid) * 4));
      auto want = B32(lane, r);
      EXPECT_EQ(got, std::make_pair(8 + want.first, 16 + want.second));
    }
  }
}

TEST(FragmentLayout, CFragmentOwnership) {
  // Every element of a 16x8 C tile has exactly one (lane, e) owner under the
  // epilogue's mapping row = gid + 8*(e/2), col = 2*tig + e%2.
  std::set<std::pair<int, int>> seen;
  for (int lane = 0; lane < 32; ++lane)
    for (int e = 0; e < 4; ++e) EXPECT_TRUE(seen.insert({lane / 4 + e / 2 * 8, lane % 4 * 2 + e % 2}).second);
  EXPECT_EQ(seen.size(), 128u);
}

// The generated source uses exactly the formulas emulated above.
TEST(FragmentLayout, GeneratedSourceSpellsTheEmulatedFormulas) {
  testing::GemmSpec plain;
  auto k1 = EmitCudaKernel(testing::ParseVerified(testing::GemmText(plain)), CudaArch{});
  ASSERT_TRUE(k1.ok()) << k1.status();
  EXPECT_NE(k1->source.find("(wm * 64 + mi * 16 + lane % 16, ks * 32 + lane / 16 * 16)"), std::string::npos);
  EXPECT_NE(k1->source.find("(ks * 16 + lane / 8 % 2 * 8 + lane % 8, (wn * 64 + ni * 8 + lane / 16 * 8) * 2)"),
            std::string::npos);
  EXPECT_NE(k1->source.find("const int i = mi * 16 + gid + e / 2 * 8, j = ni * 8 + tig * 2 + e % 2;"), std::string::npos);
  testing::GemmSpec tr;
  tr.trans_a = tr.trans_b = true;
  auto k2 = EmitCudaKernel(testing::ParseVerified(testing::GemmText(tr)), CudaArch{});
  ASSERT_TRUE(k2.ok()) << k2.status();
  EXPECT_NE(k2->source.find("(ks * 16 + lane / 16 * 8 + lane % 8, (wm * 64 + mi * 16 + lane / 8 % 2 * 8) * 2)"),
            std::string::npos);
  EXPECT_NE(k2->source.find("(wn * 64 + ni * 8 + lane / 16 * 8 + lane % 8, ks * 32 + lane / 8 % 2 * 16)"),
            std::string::npos);
}


// Shared memory addresses are the shared window's: the dynamic buffer does
// not start at 0 (a block's reserved shared memory comes first on sm_80 and
// later), so every operand read of the stage tiles (ldmatrix, lds32) adds
// the buffer's base, as the cp.async writes do, in every operand form.
TEST(FragmentLayout, OperandReadsAddTheSharedBase) {
  const std::regex read(R"((ldmatrix_x[24](_trans)?\([^,]+, |lds32\()([^)]*))");
  for (const char* in : {"f16", "f32"}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        testing::GemmSpec s;
        s.in = s.out = in;
        s.trans_a = ta, s.trans_b = tb;
        if (std::string(in) == "f32") s.bk = 16;
        auto k = EmitCudaKernel(testing::ParseVerified(testing::GemmText(s)), CudaArch{80, false});
        ASSERT_TRUE(k.ok()) << k.status();
        int reads = 0;
        for (std::sregex_iterator it(k->source.begin(), k->source.end(), read), e; it != e; ++it) {
          // The prelude's own definitions name their parameter `addr`.
          if ((*it)[3].str().rfind("addr", 0) == 0) continue;
          ++reads;
          EXPECT_EQ((*it)[3].str().rfind("smem_base + ", 0), 0u) << in << " trans " << ta << tb << ": " << (*it)[0];
        }
        EXPECT_GT(reads, 0) << in << " trans " << ta << tb;
      }
    }
  }
}

}  // namespace
}  // namespace kiln::target::cuda
