/* edgebuild on-device training known-answer test. Runs TRAIN_DATA_STEPS training steps on
 * the fixed batches of train_data.h and prints one line per step:
 *     step <k> loss <float32 bits as 8 hex digits>
 * (exact, and printable by newlib-nano, which has no %f). Exit status: 0 all steps ran
 * with finite losses; 4 a loss was NaN or infinite; 3 a weight file could not be loaded
 * (the previous weights were kept and the steps still ran); 2 bad arguments or I/O.
 * On the host (-DEB_HOST): `train_kat [--load IN.wof] [--save OUT.wof] [--grads G.bin]`
 * loads the starting weights, saves the updated ones, and writes every trainable tensor's
 * gradient of the first step (float32 little-endian, weight-only file order). */
#include <stdio.h>
#include <string.h>

#include "train_data.h"
#include "train_model.h"

/* Instruction counting brackets the first training step with these two symbols. */
__attribute__((noinline)) void eb_marker_start(void) { __asm__ volatile(""); }
__attribute__((noinline)) void eb_marker_stop(void) { __asm__ volatile(""); }

static uint32_t float_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

static int finite(float value)
{
    return value == value && value - value == 0.0f;
}

#ifdef EB_HOST
static uint8_t file_buffer[2 * TRAIN_WOF_BYTES + 64];

static int load_file(const char *path)
{
    FILE *in = fopen(path, "rb");
    size_t length;
    eb_wof_status status;
    if (!in) {
        fprintf(stderr, "train: cannot open %s\n", path);
        return 2;
    }
    length = fread(file_buffer, 1, sizeof file_buffer, in);
    fclose(in);
    status = train_load_weights(file_buffer, (uint32_t)length);
    if (status != EB_WOF_OK) {
        fprintf(stderr, "train: %s: %s; keeping the previous weights\n", path,
                eb_wof_message(status));
        return 3;
    }
    return 0;
}

static int save_file(const char *path)
{
    uint32_t written = 0;
    FILE *out;
    eb_wof_status status = train_save_weights(file_buffer, sizeof file_buffer, &written);
    if (status != EB_WOF_OK) {
        fprintf(stderr, "train: cannot encode the weights: %s\n", eb_wof_message(status));
        return 2;
    }
    out = fopen(path, "wb");
    if (!out || fwrite(file_buffer, 1, written, out) != written) {
        fprintf(stderr, "train: cannot write %s\n", path);
        if (out)
            fclose(out);
        return 2;
    }
    return fclose(out) == 0 ? 0 : 2;
}

static int save_gradients(const char *path)
{
    FILE *out = fopen(path, "wb");
    int t;
    uint32_t i;
    if (!out) {
        fprintf(stderr, "train: cannot write %s\n", path);
        return 2;
    }
    for (t = 0; t < TRAIN_PARAMS; ++t) {
        const float *g = train_grad(t);
        for (i = 0; i < train_param_count(t); ++i) {
            const uint32_t b = float_bits(g[i]);
            const unsigned char bytes[4] = {(unsigned char)(b & 0xffu), (unsigned char)((b >> 8) & 0xffu),
                                            (unsigned char)((b >> 16) & 0xffu),
                                            (unsigned char)((b >> 24) & 0xffu)};
            fwrite(bytes, 1, 4, out);
        }
    }
    return fclose(out) == 0 ? 0 : 2;
}
#endif

int main(int argc, char **argv)
{
    const char *load = NULL, *save = NULL, *grad_path = NULL;
    int k, status = 0, bad = 0;
    train_init();
#ifdef EB_HOST
    for (k = 1; k < argc; ++k) {
        if (k + 1 < argc && strcmp(argv[k], "--load") == 0)
            load = argv[++k];
        else if (k + 1 < argc && strcmp(argv[k], "--save") == 0)
            save = argv[++k];
        else if (k + 1 < argc && strcmp(argv[k], "--grads") == 0)
            grad_path = argv[++k];
        else {
            fprintf(stderr, "usage: %s [--load IN.wof] [--save OUT.wof] [--grads G.bin]\n", argv[0]);
            return 2;
        }
    }
    if (load) {
        status = load_file(load);
        if (status == 2)
            return 2;
    }
#else
    (void)argc;
    (void)argv;
#endif
    for (k = 0; k < TRAIN_DATA_STEPS; ++k) {
        float loss;
        if (k == 0) {
            eb_marker_start();
            loss = train_step(train_data_inputs[k], train_data_labels[k]);
            eb_marker_stop();
        } else {
            loss = train_step(train_data_inputs[k], train_data_labels[k]);
        }
        printf("step %d loss %08lx\n", k, (unsigned long)float_bits(loss));
        if (!finite(loss))
            bad = 1;
#ifdef EB_HOST
        if (k == 0 && grad_path && save_gradients(grad_path) != 0)
            return 2;
#endif
    }
#ifdef EB_HOST
    if (save && save_file(save) != 0)
        return 2;
#else
    {
        /* the device's save/load path: write the weights, read them back */
        static uint8_t image[TRAIN_WOF_BYTES];
        uint32_t written = 0;
        if (train_save_weights(image, sizeof image, &written) != EB_WOF_OK ||
            train_load_weights(image, written) != EB_WOF_OK) {
            printf("weight file round trip failed\n");
            return 2;
        }
    }
    (void)load;
    (void)save;
    (void)grad_path;
#endif
    printf("train: %d steps\n", TRAIN_DATA_STEPS);
    return bad ? 4 : status;
}
