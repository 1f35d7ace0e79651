// A deterministic stand-in for libFuzzer: feeds LLVMFuzzerTestOneInput each
// seed file and a fixed number of mutations of it (bit flips, byte
// overwrites, truncations, splices). Usage: fuzz_smoke ITERATIONS SEED_FILE...
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fuzz_smoke ITERATIONS SEED_FILE...\n");
    return 2;
  }
  long iterations = std::strtol(argv[1], nullptr, 10);
  std::vector<std::string> seeds;
  for (int i = 2; i < argc; ++i) {
    std::ifstream f(argv[i], std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "fuzz_smoke: cannot open %s\n", argv[i]);
      return 2;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    seeds.push_back(ss.str());
  }
  std::mt19937_64 rng(12345);
  long runs = 0;
  for (const std::string& s : seeds) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++runs;
  }
  for (long i = 0; i < iterations; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    int edits = 1 + rng() % 8;
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 5) {
        case 0: s[pos] ^= static_cast<char>(1u << (rng() % 8)); break;
        case 1: s[pos] = static_cast<char>(rng()); break;
        case 2: s.resize(pos); break;
        case 3: s.insert(pos, seeds[rng() % seeds.size()].substr(0, rng() % 64)); break;
        case 4: s.erase(pos, rng() % 16); break;
      }
    }
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++runs;
  }
  std::printf("fuzz_smoke: %ld inputs, no crash\n", runs);
  return 0;
}
