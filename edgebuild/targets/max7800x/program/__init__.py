"""The MAX7800x accelerator program: the MSDK project (cnn.c, cnn.h, weights.h, sampledata.h,
sampleoutput.h, main.c, Makefile) that configures the CNN accelerator to run a placed,
quantized model, identical in what it writes to the device to what the vendor's synthesis
tool generates for the same network.

Modules, one concept each: `device` (address map), `geometry` (a layer as the registers see
it), `kernels` (kernel memory placement and packing), `bias` (bias memory), `registers`
(register words), `data` (input and expected output words), `program` (the record and its
canonical form), `build` (assembles a program).

May import what `edgebuild.targets` may, and the max7800x modules hwlayer, placement, records.
"""
