// Experiment (not part of the library; issue 14): what mapping another process's IPC segment
// costs a fresh process, step by step. A 2,261,024-byte shared object (sizeof memarea's IPC
// segment) is made and written by the parent; each of 5 forked children times shm_open,
// fstat+mmap+close, the first read (a page fault) and a read of another page. Modes: 0 as
// memarea maps it; 1 with MAP_POPULATE; 2 mapping 4 KiB only; 3 adding a second shm_open, a
// pread of 64 bytes and a close. Build with immediate binding (as memarea is linked):
//   gcc -O2 -Wl,-z,now bench/experiments/shm_segment_probe.c -o /tmp/shm_probe
//   for m in 0 1 2 3; do /tmp/shm_probe $m; done
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
#define SZ 2261024
int main(int argc,char**argv){
  int mode=atoi(argv[1]);
  char name[64]; sprintf(name,"/shmx-%d",getpid());
  int fd=shm_open(name,O_RDWR|O_CREAT,0600); ftruncate(fd,SZ);
  char*p=mmap(0,SZ,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0); memset(p,1,4096); p[SZ/2]=3; close(fd);
  for(int r=0;r<5;r++){
  pid_t c=fork();
  if(c==0){
    double t0=now();
    int f=shm_open(name,O_RDWR|O_CLOEXEC,0);
    double t1=now();
    struct stat sb; fstat(f,&sb);
    int flags=MAP_SHARED; if(mode==1) flags|=MAP_POPULATE;
    size_t len = mode==2 ? 4096 : SZ;
    char*q=mmap(0,len,PROT_READ|PROT_WRITE,flags,f,0);
    close(f);
    double t2=now();
    volatile char x=q[0];
    double t3=now();
    volatile char y = mode==2 ? 0 : q[SZ/2];
    double t4=now();
    char b[64]; double t5=now(); if(mode==3){ int g=shm_open(name,O_RDONLY,0); pread(g,b,64,0); close(g);} double t6=now();
    printf("mode %d: shm_open %.1f fstat+mmap+close %.1f first read %.1f second page %.1f pread-path %.1f\n",mode,t1-t0,t2-t1,t3-t2,t4-t3,t6-t5);
    (void)x;(void)y;fflush(stdout);_exit(0);
  }
  waitpid(c,0,0);}
  shm_unlink(name);
}
