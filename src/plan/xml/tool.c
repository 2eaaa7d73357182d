/* tool.c - `mscclpp-plan convert FILE.xml [-o OUT.json]`: MSCCL XML -> plan JSON on stdout or
 * in OUT.json. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/xml/xml.h"

static int usage(void) {
  fprintf(stderr, "usage: mscclpp-plan convert FILE.xml [-o OUT.json]\n"
                  "  converts an MSCCL XML algorithm into an execution plan (JSON)\n");
  return 2;
}

int xml_convert_main(int argc, char** argv) {
  const char *in = NULL, *out = NULL;
  int first = argc > 1 && strcmp(argv[1], "convert") == 0 ? 2 : 1; /* tolerate argv[1] == "convert" */
  for (int i = first; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out = argv[++i];
    else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0 || in || argv[i][0] == '-') return usage();
    else in = argv[i];
  }
  if (!in) return usage();
  err_clear();
  struct xml_algo* a;
  char* json = NULL;
  size_t len = 0;
  mscclppResult_t res = xml_parse_file(in, &a);
  if (res == mscclppSuccess) {
    res = xml_to_plan_text(a, &json, &len);
    xml_algo_free(a);
  }
  if (res != mscclppSuccess) {
    fprintf(stderr, "mscclpp-plan convert: %s\n", err_last());
    return 1;
  }
  FILE* f = out ? fopen(out, "w") : stdout;
  int ok = f && fwrite(json, 1, len, f) == len && fputc('\n', f) != EOF;
  if (f && out) ok = (fclose(f) == 0) && ok;
  free(json);
  if (!ok) {
    fprintf(stderr, "mscclpp-plan convert: cannot write %s\n", out ? out : "stdout");
    return 1;
  }
  return 0;
}
