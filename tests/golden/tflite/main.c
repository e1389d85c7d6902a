/* edgebuild known-answer test. Runs the model on the KAT vectors and compares every
 * output value with the integer reference; exit status 0 = all match.
 * On the host (-DEB_HOST), `cnn_kat --batch IN OUT` instead reads int8 samples from IN
 * (CHAIN_CNN_SAMPLE_SIZE bytes each) and writes each output as int32 little-endian to OUT.
 * A sample is CHAIN_CNN_FRAMES frames: the model is reset, runs once per frame, and its output
 * after the last frame is compared (the window of a model with a buffer then holds
 * exactly the sample's frames). A known-answer vector may hold fewer frames (CHAIN_KAT_FRAMES:
 * e.g. one, the other toolchain's sample for a model with a buffer): the window then holds
 * zeros before them. */
#include <stdio.h>
#include <string.h>

#include "cnn.h"
#include "kat_vectors.h"

/* Instruction counting brackets one inference with these two symbols; with
 * -DEB_LAYER_MARKERS (the Cortex-M4 builds) cnn.c calls the third between layers. */
__attribute__((noinline)) void eb_marker_start(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eb_marker_stop(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eb_marker_layer(void) { __asm__ volatile(""); }

/* One sample of `frames` frames: reset, then one inference per frame; `measured` brackets
 * the last one. */
static void run_sample(const int8_t *sample, int frames, int measured)
{
    int f;
    chain_cnn_reset();
    for (f = 0; f < frames; ++f) {
        chain_cnn_load_input(sample + f * CHAIN_CNN_INPUT_SIZE);
        if (measured && f == frames - 1) {
            eb_marker_start();
            chain_cnn_run();
            eb_marker_stop();
        } else {
            chain_cnn_run();
        }
    }
}

static int run_kat(void)
{
    static chain_cnn_output_t out[CHAIN_CNN_OUTPUT_SIZE];
    int s, i, failures = 0;
    chain_cnn_init();
    for (s = 0; s < CHAIN_KAT_SAMPLES; ++s) {
        run_sample(chain_kat_inputs[s], CHAIN_KAT_FRAMES, s == 0);
        chain_cnn_unload(out);
        for (i = 0; i < CHAIN_CNN_OUTPUT_SIZE; ++i) {
            if (out[i] != chain_kat_expected[s][i]) {
                printf("KAT sample %d output %d: got %ld, expected %ld\n", s, i, (long)out[i],
                       (long)chain_kat_expected[s][i]);
                ++failures;
                break;
            }
        }
    }
    printf("KAT: %d of %d samples match\n", CHAIN_KAT_SAMPLES - failures, CHAIN_KAT_SAMPLES);
    return failures == 0 ? 0 : 1;
}

#ifdef EB_HOST
static int run_batch(const char *in_path, const char *out_path)
{
    static int8_t input[CHAIN_CNN_SAMPLE_SIZE];
    static chain_cnn_output_t out[CHAIN_CNN_OUTPUT_SIZE];
    FILE *in = fopen(in_path, "rb");
    FILE *dst = fopen(out_path, "wb");
    long samples = 0;
    int i;
    if (!in || !dst) {
        fprintf(stderr, "cannot open %s or %s\n", in_path, out_path);
        return 2;
    }
    chain_cnn_init();
    while (fread(input, 1, CHAIN_CNN_SAMPLE_SIZE, in) == CHAIN_CNN_SAMPLE_SIZE) {
        run_sample(input, CHAIN_CNN_FRAMES, 0);
        chain_cnn_unload(out);
        for (i = 0; i < CHAIN_CNN_OUTPUT_SIZE; ++i) {
            const long v = (long)out[i];
            const unsigned char bytes[4] = {(unsigned char)(v & 0xff), (unsigned char)((v >> 8) & 0xff),
                                            (unsigned char)((v >> 16) & 0xff),
                                            (unsigned char)((v >> 24) & 0xff)};
            fwrite(bytes, 1, 4, dst);
        }
        ++samples;
    }
    fclose(in);
    fclose(dst);
    printf("batch: %ld samples\n", samples);
    return 0;
}
#endif

int main(int argc, char **argv)
{
#ifdef EB_HOST
    if (argc == 4 && strcmp(argv[1], "--batch") == 0) {
        return run_batch(argv[2], argv[3]);
    }
#endif
    (void)argc;
    (void)argv;
    return run_kat();
}
