package mcunn

import (
	"fmt"
	"strings"
)

// C text of kiln_nn's argument structs, as compound literals whose
// fields are the call_extern's arguments in order.
const (
	dims    = "&(const kiln_nn_dims){%s, %s, %s, %s}"
	quant   = "&(const kiln_nn_quant_params){%s, %s, %s}"
	tile    = "{%s, %s}"
	noBias  = "(const int32_t *)0"
	convPar = "&(const kiln_nn_conv_params){%s, %s, %s, " + tile + ", " + tile + ", " + tile + ", %s, " + tile + "}"
	fcPar   = "&(const kiln_nn_fc_params){%s, %s, %s, " + tile + "}"
)

// callTemplates are the C of each kiln_nn call a kernel makes (keyed by
// kernel.call; a "_nobias" variant passes a null bias): fmt templates
// whose %s are the call_extern's arguments. Every argument is a number
// or a buffer's name that kiln generated; no text from a model reaches
// the C.
var callTemplates = map[string]string{
	"kiln_nn_conv_s8": "kiln_nn_conv_s8(&(const kiln_nn_context){%s, %s}, " + convPar + ", " + quant + ", " +
		dims + ", %s, " + dims + ", %s, %s, %s, " + dims + ", %s)",
	"kiln_nn_depthwise_conv_s8": "kiln_nn_depthwise_conv_s8(" + convPar + ", " + quant + ", " +
		dims + ", %s, " + dims + ", %s, %s, " + dims + ", %s)",
	"kiln_nn_max_pool_s8": "kiln_nn_max_pool_s8(&(const kiln_nn_pool_params){" + tile + ", " + tile + ", " + tile + ", " + tile + "}, " +
		dims + ", %s, " + dims + ", %s)",
	"kiln_nn_fully_connected_s8":            "kiln_nn_fully_connected_s8(" + fcPar + ", " + quant + ", %s, %s, %s, %s, %s, %s, %s)",
	"kiln_nn_fully_connected_s8_nobias":     "kiln_nn_fully_connected_s8(" + fcPar + ", " + quant + ", %s, %s, %s, %s, %s, " + noBias + ", %s)",
	"kiln_nn_fully_connected_s8_s32":        "kiln_nn_fully_connected_s8_s32(" + fcPar + ", %s, %s, %s, %s, %s, %s, %s)",
	"kiln_nn_fully_connected_s8_s32_nobias": "kiln_nn_fully_connected_s8_s32(" + fcPar + ", %s, %s, %s, %s, %s, " + noBias + ", %s)",
	"kiln_nn_global_avg_pool_s8": "kiln_nn_global_avg_pool_s8(&(const kiln_nn_avg_params){%s, %s, " + tile + "}, " + quant + ", " +
		dims + ", %s, %s)",
	"kiln_nn_softmax_s8": "kiln_nn_softmax_s8(&(const kiln_nn_softmax_params){%s, %s, %s, " + tile + "}, %s, %s, %s, %s, %s)",
	"kiln_nn_add_s8":     "kiln_nn_add_s8(&(const kiln_nn_add_params){%s, %s, %s, %s, %s, " + tile + "}, " + quant + ", %s, %s, %s, %s)",
}

// templateArgs is the number of arguments a call template takes.
func templateArgs(name string) (int, bool) {
	t, ok := callTemplates[name]
	if !ok {
		return 0, false
	}
	return strings.Count(t, "%s"), true
}

// replaceCallExtern prints a kiln_nn call_extern with its argument
// structs (CCodegen.ReplaceCallExtern); other externs are not its own.
func replaceCallExtern(name string, args []string) (string, bool) {
	t, ok := callTemplates[name]
	if !ok || strings.Count(t, "%s") != len(args) {
		return "", false
	}
	vals := make([]any, len(args))
	for i, a := range args {
		vals[i] = a
	}
	return fmt.Sprintf(t, vals...), true
}
