#include "mdr_config.h"
int main(void) { return 77; }
