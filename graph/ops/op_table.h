//===- op_table.h - The table of operator families --------------*- C++ -*-===//
//
// Each operator family lives in one source file under graph/ops/ and exposes
// one Register*Ops function; RegisterAllOps (op_table.cc) calls them all.
//
//===----------------------------------------------------------------------===//
#pragma once

namespace kiln {

class OpRegistry;

void RegisterAllOps(OpRegistry& r);

void RegisterElementwiseOps(OpRegistry& r);    // elementwise.cc: unary/binary math, logic, compare, Where, Clip, Cast, activations
void RegisterReductionOps(OpRegistry& r);      // reduction.cc: Reduce*, ArgMax/ArgMin, CumSum, Hardmax
void RegisterNormalizationOps(OpRegistry& r);  // normalization.cc: Softmax, LogSoftmax, *Norm, LRN, MVN
void RegisterMatMulOps(OpRegistry& r);         // matmul.cc: MatMul, Gemm, Einsum, MatMulInteger, QLinearMatMul
void RegisterConvOps(OpRegistry& r);           // conv.cc: Conv, ConvTranspose, ConvInteger, QLinearConv, pools
void RegisterShapeOps(OpRegistry& r);          // shape.cc: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Expand, ...
void RegisterMovementOps(OpRegistry& r);       // movement.cc: Transpose, Concat, Split, Slice, Gather*, Scatter*, Pad, Tile, ...
void RegisterGeneratorOps(OpRegistry& r);      // generator.cc: Constant, ConstantOfShape, Range, EyeLike, Random*, OneHot
void RegisterControlFlowOps(OpRegistry& r);    // control_flow.cc: If, Loop, Scan
void RegisterRecurrentOps(OpRegistry& r);      // recurrent.cc: LSTM, GRU, RNN
void RegisterResampleOps(OpRegistry& r);       // resample.cc: Resize, Upsample, GridSample
void RegisterSelectionOps(OpRegistry& r);      // selection.cc: TopK, NonMaxSuppression, NonZero, Unique
void RegisterQuantizationOps(OpRegistry& r);   // quantization.cc: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear
void RegisterTextOps(OpRegistry& r);           // text.cc: StringNormalizer, TfIdfVectorizer
void RegisterSignalOps(OpRegistry& r);         // signal.cc: DFT, STFT, MelWeightMatrix
void RegisterTrainingOps(OpRegistry& r);       // training.cc: Adagrad, Adam, Momentum, Gradient (ai.onnx.preview.training)
void RegisterCompositeOps(OpRegistry& r);      // composite.cc: kiln.Gelu, kiln.Attention
void RegisterFusedOps(OpRegistry& r);          // fused.cc: kiln.Fused, kiln.GearDispatch (introduced by passes)
void RegisterCollectiveOps(OpRegistry& r);     // collective.cc: kiln.AllReduce (data-parallel training steps)

}  // namespace kiln
