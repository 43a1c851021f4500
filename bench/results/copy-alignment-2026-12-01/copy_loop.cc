#include <initializer_list>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <immintrin.h>
static void ssecopy(void* d,const void* s,size_t n){auto*dd=(char*)d;auto*ss=(const char*)s;size_t i=0;
 for(;i+64<=n;i+=64){__m128i a=_mm_loadu_si128((const __m128i*)(ss+i)),b=_mm_loadu_si128((const __m128i*)(ss+i+16)),c=_mm_loadu_si128((const __m128i*)(ss+i+32)),e=_mm_loadu_si128((const __m128i*)(ss+i+48));
 _mm_storeu_si128((__m128i*)(dd+i),a);_mm_storeu_si128((__m128i*)(dd+i+16),b);_mm_storeu_si128((__m128i*)(dd+i+32),c);_mm_storeu_si128((__m128i*)(dd+i+48),e);}
 memcpy(dd+i,ss+i,n-i);}
int main(){ char* s=(char*)aligned_alloc(4096,4<<20); char* d0=(char*)aligned_alloc(4096,(4<<20)+4096); memset(s,1,4<<20); memset(d0,0,(4<<20)+4096);
 for(int off: {0,16}) for(size_t n: {size_t(4096),size_t(65536),size_t(262144),size_t(1<<20)}){ char* d=d0+off; int it=(64<<20)/n;
  for(int m=0;m<2;m++){ auto a=std::chrono::steady_clock::now(); for(int k=0;k<it;k++){ if(m==0) memcpy(d,s,n); else ssecopy(d,s,n); asm volatile(""::"r"(d):"memory");} double t=std::chrono::duration<double>(std::chrono::steady_clock::now()-a).count();
   printf("off %2d n %7zu %s %.1f GB/s\n",off,n,m?"sse   ":"memcpy",n*(double)it/t/1e9);} } }
