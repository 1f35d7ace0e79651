//===- cmd_opt.cc - `kiln opt` --------------------------------------------===//
#include <fstream>
#include <iostream>

#include "absl/flags/flag.h"
#include "graph/ir/printer.h"
#include "graph/verifier/verifier.h"
#include "tools/kiln/cli_util.h"

ABSL_FLAG(std::string, o, "", "Output .kir file (default: standard output).");
ABSL_FLAG(bool, inline_constants, false, "Print every constant inline instead of as a blob reference.");

namespace kiln::cli {
namespace {

int Opt(const std::vector<std::string>& args) {
  if (args.size() != 1) return Fail("opt takes one model (MODEL.onnx or MODEL.kir)");
  auto model = LoadModel(args[0]);
  if (!model.ok()) return Fail(model.status());
  absl::Status v = VerifyModel(*model);
  if (!v.ok()) return Fail(v);
  PrintOptions po;
  po.inline_all_constants = absl::GetFlag(FLAGS_inline_constants);
  std::string out_path = absl::GetFlag(FLAGS_o);
  BlobStore blobs;
  std::string text = PrintModel(*model, po, out_path.empty() ? nullptr : &blobs);
  if (out_path.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream f(out_path);
  if (!f || !(f << text)) return Fail("cannot write '" + out_path + "'");
  if (!blobs.empty()) {
    absl::Status s = SaveBlobStore(blobs, out_path + ".blobs");
    if (!s.ok()) return Fail(s);
  }
  return 0;
}

}  // namespace

extern const Command kOptCommand;
const Command kOptCommand = {
    "opt", "import, verify and print a model as .kir text",
    R"(usage: kiln opt MODEL.onnx|MODEL.kir [-o OUT.kir] [--inline_constants]

Imports (or parses) the model, verifies it and prints it in kiln's text form.
Constants larger than 16 elements print as blob references whose bytes go to
OUT.kir.blobs beside the output (or stay elided when printing to stdout);
--inline_constants prints every constant in full.

flags:
  -o OUT.kir           output file; default standard output
  --inline_constants   print all constants inline
)",
    Opt};

}  // namespace kiln::cli
