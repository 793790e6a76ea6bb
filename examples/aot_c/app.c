/* Run model "model" of an ember AOT package from C, without Python.

   Build:  cc app.c -I$(python -m ember.aot --include-dir) -L$(python -m ember.aot --lib-dir) \
              -Wl,-rpath,$(python -m ember.aot --lib-dir) -lember_aot -ldl -o app
   Run:    ./app mlp.pt2 3          (batch of 3 rows; prints the output values, one per line)

   The input is a float32 [batch, 8] tensor with x[i] = (i % 7) * 0.25 - 0.5. */
#include <ember/aot/runner.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s PACKAGE.pt2 BATCH [MODEL]\n", argv[0]);
    return 2;
  }
  ember_aot_model *m = NULL;
  if (ember_aot_load(argv[1], argc > 3 ? argv[3] : "model", &m) != 0) {
    fprintf(stderr, "load failed: %s\n", ember_aot_last_error());
    return 1;
  }
  int64_t n_in = 0, n_out = 0;
  ember_aot_num_inputs(m, &n_in);
  ember_aot_num_outputs(m, &n_out);
  const char *isa = ember_aot_metadata(m, "AOTI_CPU_ISA");
  fprintf(stderr, "inputs %lld outputs %lld isa %s\n", (long long)n_in, (long long)n_out,
          isa ? isa : "?");

  int64_t batch = atoll(argv[2]), shape[2] = {batch, 8};
  float *x = malloc(sizeof(float) * (size_t)(batch * 8));
  for (int64_t i = 0; i < batch * 8; i++) x[i] = (float)(i % 7) * 0.25f - 0.5f;
  DLTensor in = {.data = x, .device = {kDLCPU, 0}, .ndim = 2,
                 .dtype = {kDLFloat, 32, 1}, .shape = shape, .strides = NULL, .byte_offset = 0};
  DLTensor *inputs[1] = {&in};
  DLTensor *outputs[1] = {NULL};
  if (ember_aot_run(m, inputs, 1, outputs, 1) != 0) {
    fprintf(stderr, "run failed: %s\n", ember_aot_last_error());
    ember_aot_unload(m);
    return 1;
  }
  DLTensor *y = outputs[0];
  int64_t n = 1;
  printf("shape");
  for (int d = 0; d < y->ndim; d++) {
    printf(" %lld", (long long)y->shape[d]);
    n *= y->shape[d];
  }
  printf("\n");
  for (int64_t i = 0; i < n; i++) printf("%.9g\n", ((float *)y->data)[i]);
  ember_aot_free_output(y);
  ember_aot_unload(m);
  free(x);
  return 0;
}
