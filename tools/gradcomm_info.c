/* gradcomm-info: what gradcomm sees on this machine (CUDA runtime and driver,
 * NCCL built and loaded, GPUs). Uses only the public C API. */
#include <stdio.h>
#include <stdlib.h>

#include <gradcomm/gradcomm.h>

int main(void) {
  size_t required = 0;
  char* report;
  if (gcommGetEnvironmentReport(NULL, 0, &required) != gcommSuccess) {
    fprintf(stderr, "gradcomm-info: %s\n", gcommGetLastError());
    return 1;
  }
  report = (char*)malloc(required);
  if (report == NULL || gcommGetEnvironmentReport(report, required, NULL) != gcommSuccess) {
    fprintf(stderr, "gradcomm-info: %s\n", gcommGetLastError());
    free(report);
    return 1;
  }
  fputs(report, stdout);
  free(report);
  return 0;
}
