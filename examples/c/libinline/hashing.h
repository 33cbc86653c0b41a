unsigned lib_hash(const char *s);
