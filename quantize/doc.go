// Package quantize is kiln's static post-training quantizer, the engine of
// `kiln quantize`. It sits before the frontend and works on ONNX itself:
// it reads a float model, measures the range of every activation that
// feeds or leaves a quantizable operator on calibration inputs (min/max or
// percentile), and writes a QDQ model that any ONNX tool reads:
//
//   - activations as QuantizeLinear/DequantizeLinear pairs, int8 or uint8,
//     asymmetric, one scale and zero point per tensor;
//   - weights of Conv, Gemm and MatMul as int8 initializers, symmetric, one
//     scale per output channel (or per tensor), behind a DequantizeLinear;
//   - biases of Conv and Gemm as int32 initializers with scale input scale
//     times weight scale and zero point 0, so that an integer engine adds
//     them to its accumulator unchanged.
//
// A Conv, Gemm or MatMul followed by its only consumer Relu or Clip (and a
// MatMul by a bias Add) keeps the intermediate in float: the pair goes
// after the activation, where an integer engine applies the activation as
// the clamp of its requantisation.
//
// Compare runs the float and the quantized model on the same inputs and
// reports top-1 agreement and the largest error. Models are run through an
// Engine: the CLI compiles them with kiln's C target; RefEngine interprets
// them with kiln's reference engine.
package quantize
