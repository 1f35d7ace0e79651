// Tests of the ONNX importer: good models import with their types; every kind
// of bad input gets a one-line error naming the file, node and op.
#include "frontend/onnx/importer.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_import {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

onnx::ValueInfoProto* AddValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list,
                               const std::string& name, std::vector<int64_t> dims, int elem = 1) {
  onnx::ValueInfoProto* v = list->Add();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    if (d < 0) shape->add_dim()->set_dim_param("batch");
    else shape->add_dim()->set_dim_value(d);
  }
  return v;
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out, const std::string& name) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// x[batch,4] + y[batch,4] -> Relu -> z
onnx::ModelProto GoodModel(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  AddValue(g->mutable_input(), "x", {-1, 4});
  AddValue(g->mutable_input(), "y", {-1, 4});
  AddNode(g, "Add", {"x", "y"}, {"s"}, "add0");
  AddNode(g, "Relu", {"s"}, {"z"}, "relu0");
  AddValue(g->mutable_output(), "z", {-1, 4});
  return m;
}

absl::StatusOr<Model> Import(const onnx::ModelProto& m) {
  return ImportBytes(m.SerializeAsString(), "m.onnx", "");
}

TEST(Importer, ImportsAndInfersSymbolicShapes) {
  auto m = Import(GoodModel());
  ASSERT_TRUE(m.ok()) << m.status();
  const Graph& g = *m->graph;
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(g.outputs()[0]->type().ToString(), "f32[batch,4]");
  EXPECT_EQ(g.NodeList()[0]->output(0)->type().ToString(), "f32[batch,4]");
  EXPECT_EQ(g.NodeList()[0]->name(), "add0");
}

TEST(Importer, InitializersBecomeConstants) {
  onnx::ModelProto m = GoodModel();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("y");
  init->set_data_type(1);
  init->add_dims(4);
  for (int i = 0; i < 4; ++i) init->add_float_data(i);
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph->inputs().size(), 1u);
  Value* y = r->graph->Lookup("y");
  ASSERT_TRUE(y && y->is_constant());
  EXPECT_EQ(y->constant().data<float>()[3], 3.0f);
}

TEST(Importer, RejectsRandomAndTruncatedBytes) {
  auto r = ImportBytes("\x12\x34garbage\xff\xff\xff", "junk.onnx", "");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("junk.onnx"));
  std::string bytes = GoodModel().SerializeAsString();
  for (size_t cut : {bytes.size() / 2, bytes.size() - 3}) {
    auto t = ImportBytes(bytes.substr(0, cut), "cut.onnx", "");
    EXPECT_FALSE(t.ok()) << "cut at " << cut;
    if (!t.ok()) {
      EXPECT_THAT(t.status().message(), HasSubstr("cut.onnx"));
    }
  }
}

TEST(Importer, RejectsUnknownOp) {
  onnx::ModelProto m = GoodModel();
  m.mutable_graph()->mutable_node(1)->set_op_type("Frobnicate");
  auto r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("m.onnx"), HasSubstr("relu0"), HasSubstr("Frobnicate")));
}

TEST(Importer, RejectsUnknownDomain) {
  onnx::ModelProto m = GoodModel();
  auto* op = m.add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  m.mutable_graph()->mutable_node(1)->set_domain("com.example");
  auto r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("relu0"), HasSubstr("unknown domain 'com.example'")));
}

TEST(Importer, RejectsUnsupportedOpset) {
  auto r = Import(GoodModel(/*opset=*/18));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("m.onnx"), HasSubstr("opset 18")));
}

TEST(Importer, RejectsWrongArity) {
  onnx::ModelProto m = GoodModel();
  m.mutable_graph()->mutable_node(1)->add_input("x");
  auto r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("relu0"), HasSubstr("(Relu)"), HasSubstr("inputs")));
}

TEST(Importer, RejectsMismatchedShapes) {
  onnx::ModelProto m = GoodModel();
  m.mutable_graph()->clear_input();
  AddValue(m.mutable_graph()->mutable_input(), "x", {2, 3});
  AddValue(m.mutable_graph()->mutable_input(), "y", {4, 5});
  m.mutable_graph()->clear_output();
  AddValue(m.mutable_graph()->mutable_output(), "z", {});
  m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  auto r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("add0"), HasSubstr("(Add)"), HasSubstr("broadcast")));
}

TEST(Importer, RejectsCycles) {
  onnx::ModelProto m = GoodModel();
  // add0 now reads relu0's output, which reads add0's output.
  m.mutable_graph()->mutable_node(0)->set_input(1, "z");
  auto r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cycle"));
}

TEST(Importer, RejectsUndefinedInput) {
  onnx::ModelProto m = GoodModel();
  m.mutable_graph()->mutable_node(1)->set_input(0, "nowhere");
  auto r = Import(m);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), AllOf(HasSubstr("relu0"), HasSubstr("'nowhere'")));
}

TEST(Importer, ExternalData) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "kiln_importer_test_ext";
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    float data[4] = {1, 2, 3, 4};
    f.write(reinterpret_cast<const char*>(data), sizeof data);
  }
  onnx::ModelProto m = GoodModel();
  auto* init = m.mutable_graph()->add_initializer();
  init->set_name("y");
  init->set_data_type(1);
  init->add_dims(4);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  auto r = ImportBytes(m.SerializeAsString(), "ext.onnx", dir.string());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->graph->Lookup("y")->constant().data<float>()[2], 3.0f);

  kv->set_value("missing.bin");
  auto missing = ImportBytes(m.SerializeAsString(), "ext.onnx", dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), AllOf(HasSubstr("ext.onnx"), HasSubstr("missing.bin")));

  kv->set_value("../escape.bin");
  auto escape = ImportBytes(m.SerializeAsString(), "ext.onnx", dir.string());
  ASSERT_FALSE(escape.ok());
  EXPECT_THAT(escape.status().message(), HasSubstr("inside the model's directory"));
  fs::remove_all(dir);
}

TEST(Importer, SubgraphsSeeOuterValues) {
  onnx::ModelProto m = GoodModel();
  onnx::GraphProto* g = m.mutable_graph();
  AddValue(g->mutable_input(), "c", {}, /*elem=*/9);
  onnx::NodeProto* iff = AddNode(g, "If", {"c"}, {"w"}, "if0");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* a = iff->add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    onnx::GraphProto* b = a->mutable_g();
    b->set_name(branch);
    AddNode(b, "Relu", {"z"}, {std::string(branch) + "_out"}, std::string(branch) + "_relu");
    AddValue(b->mutable_output(), std::string(branch) + "_out", {-1, 4});
  }
  g->clear_output();
  AddValue(g->mutable_output(), "w", {-1, 4});
  auto r = Import(m);
  ASSERT_TRUE(r.ok()) << r.status();
  Node* n = r->graph->NodeList().back();
  ASSERT_EQ(n->op(), "If");
  Graph* then_g = n->attr("then_branch")->g();
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->NodeList()[0]->input(0), r->graph->Lookup("z"));
}

}  // namespace
}  // namespace kiln::onnx_import
