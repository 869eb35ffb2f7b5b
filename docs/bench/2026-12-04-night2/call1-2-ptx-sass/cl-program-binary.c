// Builds common.cl + one kernel file with the given options on the first GPU and writes the program binary
// (PTX on NVIDIA) to the output file.
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static char* slurp(const char* p, size_t* n) {
  FILE* f = fopen(p, "rb"); if (!f) { perror(p); exit(1); }
  fseek(f, 0, SEEK_END); *n = ftell(f); fseek(f, 0, SEEK_SET);
  char* s = malloc(*n + 1); fread(s, 1, *n, f); s[*n] = 0; fclose(f); return s;
}
int main(int argc, char** argv) {
  if (argc < 5) { fprintf(stderr, "nvptx common.cl file.cl 'options' out.ptx\n"); return 2; }
  size_t n1, n2; char* a = slurp(argv[1], &n1); char* b = slurp(argv[2], &n2);
  char* src = malloc(n1 + n2 + 2); memcpy(src, a, n1); src[n1] = '\n'; memcpy(src + n1 + 1, b, n2 + 1);
  cl_platform_id plats[8]; cl_uint np = 0; clGetPlatformIDs(8, plats, &np);
  cl_device_id dev = 0;
  for (cl_uint i = 0; i < np && !dev; ++i) clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_GPU, 1, &dev, NULL);
  if (!dev) { fprintf(stderr, "no device\n"); return 1; }
  cl_int st; cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &st);
  const char* srcs[] = {src}; cl_program p = clCreateProgramWithSource(ctx, 1, srcs, NULL, &st);
  st = clBuildProgram(p, 1, &dev, argv[3], NULL, NULL);
  size_t len = 0; clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, NULL, &len);
  char* log = malloc(len + 1); clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, len, log, NULL); log[len] = 0;
  printf("build %d\n%s\n", st, log);
  if (st) return 1;
  size_t size = 0; clGetProgramInfo(p, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL);
  unsigned char* bin = malloc(size); unsigned char* bins[] = {bin};
  clGetProgramInfo(p, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL);
  FILE* f = fopen(argv[4], "wb"); fwrite(bin, 1, size, f); fclose(f);
  printf("wrote %zu bytes\n", size);
  return 0;
}
