#include <initializer_list>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
int main(){ char* s0=(char*)aligned_alloc(4096,(4<<20)+4096); char* d0=(char*)aligned_alloc(4096,(4<<20)+4096); memset(s0,1,(4<<20)+4096); memset(d0,0,(4<<20)+4096);
 int pairs[][2]={{0,0},{16,16},{16,0},{0,16},{0,32},{0,8},{0,48},{0,64},{32,0},{0,1}};
 for(auto& p: pairs){ size_t n=65536; char* s=s0+p[0]; char* d=d0+p[1]; int it=(64<<20)/n;
   auto a=std::chrono::steady_clock::now(); for(int k=0;k<it;k++){ memcpy(d,s,n); asm volatile(""::"r"(d):"memory");} double t=std::chrono::duration<double>(std::chrono::steady_clock::now()-a).count();
   printf("src+%2d dst+%2d: %.1f GB/s\n",p[0],p[1],n*(double)it/t/1e9);} }
